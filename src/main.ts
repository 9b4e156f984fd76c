#!/usr/bin/env node
import http from 'node:http';
import https from 'node:https';
import { parseArgs } from 'node:util';
import { createAdminServer } from './admin/server.ts';
import { createTokenApiServer } from './api/server.ts';
import { runHashPassword } from './auth/hash-password-cli.ts';
import { createMasterkeySource, type MasterkeySource } from './auth/masterkey.ts';
import { createAuthStage } from './auth/stage.ts';
import { formatIssue } from './config/issues.ts';
import { loadConfig } from './config/load.ts';
import { startHotReload } from './config/reload.ts';
import type { MainConfig, UpstreamsConfig } from './config/types.ts';
import { createLifecycle } from './lifecycle.ts';
import { listen } from './listen.ts';
import { createLogger } from './log.ts';
import { createRequestRecorder } from './observe.ts';
import { answerClientError } from './proxy/client-error.ts';
import { createPipeline } from './proxy/pipeline.ts';
import { createProxyHandler } from './proxy/server.ts';
import { createRateLimitStage } from './proxy/stages/rate-limit.ts';
import { createToHttpsStage } from './proxy/stages/to-https.ts';
import { createTlsContextProvider, type TlsContextProvider } from './proxy/tls.ts';
import { compileRoutingTable, RoutingCompileError } from './routing/compile.ts';
import type { RoutingTable } from './routing/types.ts';
import { createRuntime } from './runtime.ts';
import { createBalanceStage } from './upstream/balance.ts';
import { createTrustTest } from './upstream/client-address.ts';
import { createForwarder, type ForwardObserver, UpstreamPools } from './upstream/forward.ts';
import { createServerHealth } from './upstream/health.ts';
import { createWebSocketHandler, isWebSocketUpgrade } from './upstream/websocket.ts';

const USAGE = `usage: tollgate [start|validate] [--config main.yaml]
       tollgate hash-password < password

  start          run the proxy (default)
  validate       check main.yaml and upstreams.yaml, print every problem, exit 1 if any
  hash-password  print a scrypt hash of the password read on stdin, for a basic-auth password_hash

--config falls back to $TOLLGATE_CONFIG, then ./main.yaml`;

function configPath(value: string | undefined): string {
  return value || process.env.TOLLGATE_CONFIG || 'main.yaml';
}

async function loadOrExplain(path: string): Promise<{ main: MainConfig; upstreams: UpstreamsConfig } | null> {
  const loaded = await loadConfig(path);
  if (loaded.ok) return loaded.value;
  for (const issue of loaded.issues) process.stderr.write(`${formatIssue(issue)}\n`);
  process.stderr.write(`${loaded.issues.length} problem${loaded.issues.length === 1 ? '' : 's'} found\n`);
  return null;
}

/** Compiles, or explains why not: two keys that normalise to the same host or prefix are ambiguous. */
function compileOrExplain(upstreams: UpstreamsConfig): RoutingTable | null {
  try {
    return compileRoutingTable(upstreams);
  } catch (error) {
    if (!(error instanceof RoutingCompileError)) throw error;
    process.stderr.write(`${upstreams.file}: ${error.message}\n`);
    return null;
  }
}

/**
 * Everything start and validate share after loading: the compiled table and the masterkey (read from
 * masterkey_file or the environment). Explains and returns null when either cannot be had.
 */
function prepare(config: {
  main: MainConfig;
  upstreams: UpstreamsConfig;
}): { table: RoutingTable; masterkeys: MasterkeySource; warnings: string[] } | null {
  const table = compileOrExplain(config.upstreams);
  if (table === null) return null;
  let masterkeys: MasterkeySource;
  try {
    masterkeys = createMasterkeySource(config.main, config.upstreams);
  } catch (error) {
    process.stderr.write(`tollgate: ${(error as Error).message}\n`);
    return null;
  }
  const warnings: string[] = [];
  const jwtRoutes = table.routes.filter((route) => route.auth?.type === 'jwt');
  if (jwtRoutes.length > 0 && masterkeys.current() === null) {
    // Fail closed, but say so: with no masterkey every token is refused and no token can be issued.
    warnings.push(
      `no masterkey is configured, so every request to the jwt routes (${jwtRoutes.map((r) => r.id).join(', ')}) ` +
        'will be refused; set masterkey, masterkey_file or TOLLGATE_MASTERKEY',
    );
  }
  return { table, masterkeys, warnings };
}

async function validate(path: string): Promise<number> {
  const config = await loadOrExplain(path);
  if (config === null) return 1;
  const prepared = prepare(config);
  if (prepared === null) return 1;
  const { table, warnings } = prepared;
  for (const warning of warnings) process.stderr.write(`warning: ${warning}\n`);
  process.stdout.write(
    `valid: ${config.main.file} and ${config.upstreams.file}: ${config.upstreams.hosts.length} hosts, ` +
      `${table.routes.length} routes, ${table.servers.length} servers\n`,
  );
  return 0;
}

async function start(path: string): Promise<number> {
  const config = await loadOrExplain(path);
  if (config === null) return 1;
  const { main } = config;
  const prepared = prepare(config);
  if (prepared === null) return 1;
  const { table, masterkeys } = prepared;
  const logger = createLogger(main.logLevel);
  for (const warning of prepared.warnings) logger.warn(warning);
  const runtime = createRuntime(main, logger, table);
  const pools = new UpstreamPools(main.timeouts);
  runtime.onTableSwap((next) => pools.retainOnly(next));
  const health = createServerHealth({ logger });
  health.sync(runtime.table());
  runtime.onTableSwap((next) => health.sync(next));

  // Every upstream attempt, HTTP or WebSocket, feeds passive health the same way.
  const upstreamObserver: ForwardObserver = {
    onUpstreamFailure: (request, server, kind) => health.reportFailure(request.route, server, kind),
    onUpstreamSuccess: (request, server) => health.reportSuccess(request.route, server),
  };
  const forward = createForwarder({ pools, observer: upstreamObserver });
  const rateLimit = createRateLimitStage({ main, logger });
  const stages = createPipeline({
    toHttps: createToHttpsStage(main),
    rateLimit: rateLimit.stage,
    authenticate: createAuthStage({ tokenParam: main.tokenParam, masterkey: masterkeys.current, logger }),
    balance: createBalanceStage({ health }),
  });
  const recorder = createRequestRecorder(logger, main.accessLog, main.tokenParam);
  const isTrustedProxy = createTrustTest(main.trustedProxies);
  const serverOptions = {
    keepAliveTimeout: main.timeouts.clientKeepAliveMs,
    headersTimeout: main.timeouts.clientHeadersMs,
    // Uploads and long responses are bounded by the upstream timeouts, not by a total request timer.
    requestTimeout: 0,
    // Only WebSocket upgrades leave the HTTP path; any other Upgrade is served as a plain request.
    shouldUpgradeCallback: isWebSocketUpgrade,
    // A missing Host is answered by resolveRequest with our JSON 400 rather than Node's bare one.
    requireHostHeader: false,
  };
  const handler = createProxyHandler({ runtime, stages, forward, recorder, isTrustedProxy });
  const webSockets = createWebSocketHandler({
    runtime,
    stages,
    recorder,
    isTrustedProxy,
    observer: upstreamObserver,
  });
  const proxyServer = http.createServer(serverOptions, handler);
  proxyServer.on('upgrade', webSockets.handleUpgrade);
  proxyServer.on('clientError', answerClientError);
  let tls: TlsContextProvider | null = null;
  let tlsServer: https.Server | null = null;
  if (main.proxyAddressTls && main.tlsCertificate && main.tlsKeyFile) {
    try {
      tls = createTlsContextProvider({ certFile: main.tlsCertificate, keyFile: main.tlsKeyFile, logger });
    } catch (error) {
      process.stderr.write(
        `tollgate: cannot load tls_certificate/tls_key_file: ${(error as Error).message}\n`,
      );
      return 1;
    }
    tlsServer = https.createServer({ ...serverOptions, ...tls.current() }, handler);
    tlsServer.on('upgrade', webSockets.handleUpgrade);
    tlsServer.on('clientError', answerClientError);
    tls.attach(tlsServer);
  }
  const adminServer = createAdminServer(runtime);
  const tokenApiServer = createTokenApiServer({ main, masterkey: masterkeys.current, logger });

  try {
    await listen(adminServer, main.adminAddress, 'admin_address');
    await listen(proxyServer, main.proxyAddressHttp, 'proxy_address_http');
    await listen(tokenApiServer, main.configAddress, 'config_address');
    if (tlsServer && main.proxyAddressTls) await listen(tlsServer, main.proxyAddressTls, 'proxy_address_tls');
  } catch (error) {
    process.stderr.write(`tollgate: ${(error as Error).message}\n`);
    return 1;
  }
  // Hot reload (issue 4, src/config/reload.ts): watches the directories of both files; SIGHUP checks now.
  const hotReload = await startHotReload({ runtime, logger, beforeSwap: (next) => masterkeys.reload(next) });
  process.on('SIGHUP', () => hotReload.trigger('SIGHUP'));
  runtime.phase = 'ready';
  logger.info({ hash: runtime.table().hash, routes: runtime.table().routes.length }, 'tollgate ready');

  // Graceful shutdown (issue 4, src/lifecycle.ts): readiness off, delay, stop accepting, drain, exit 0.
  const lifecycle = createLifecycle({
    runtime,
    main,
    logger,
    servers: [proxyServer, ...(tlsServer ? [tlsServer] : []), tokenApiServer],
    keepUntilExit: [adminServer],
    cleanup: [
      () => hotReload.close(),
      () => tls?.close(),
      () => webSockets.closeAll(),
      () => rateLimit.close(),
      () => health.close(),
      () => pools.close(),
    ],
    onExit: (code) => process.exit(code),
  });
  process.on('SIGTERM', () => lifecycle.shutdown('SIGTERM'));
  process.on('SIGINT', () => lifecycle.shutdown('SIGINT'));
  return new Promise(() => {});
}

async function run(argv: string[]): Promise<number> {
  // Its own options (--log-n), so it is dispatched before the start/validate parser.
  if (argv[0] === 'hash-password') return runHashPassword(argv.slice(1));
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { config: { type: 'string', short: 'c' }, help: { type: 'boolean', short: 'h' } },
    });
  } catch (error) {
    process.stderr.write(`tollgate: ${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (parsed.values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const [command = 'start', ...rest] = parsed.positionals;
  const path = configPath(parsed.values.config as string | undefined);
  if (rest.length > 0) {
    process.stderr.write(`tollgate: unexpected argument '${rest[0]}'\n${USAGE}\n`);
    return 2;
  }
  switch (command) {
    case 'start':
      return start(path);
    case 'validate':
      return validate(path);
    default:
      process.stderr.write(`tollgate: unknown command '${command}'\n${USAGE}\n`);
      return 2;
  }
}

// run() settles only when the command is over (a running proxy never settles it), so exit
// explicitly: a start that failed half-way may have left listeners or timers holding the loop open.
run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`tollgate: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
