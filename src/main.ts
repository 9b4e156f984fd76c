#!/usr/bin/env node
import http from 'node:http';
import { parseArgs } from 'node:util';
import { createAdminServer } from './admin/server.ts';
import { loadConfig } from './config/load.ts';
import { formatIssue } from './config/issues.ts';
import type { MainConfig, UpstreamsConfig } from './config/types.ts';
import { listen } from './listen.ts';
import { createLogger } from './log.ts';
import { createRequestRecorder } from './observe.ts';
import { createBalanceStage } from './proxy/balance.ts';
import { createTrustTest } from './proxy/client-address.ts';
import { createForwarder, UpstreamPools } from './proxy/forward.ts';
import { createServerHealth } from './proxy/health.ts';
import { createPipeline } from './proxy/pipeline.ts';
import { createProxyHandler } from './proxy/server.ts';
import { compileRoutingTable } from './routing/compile.ts';
import { createRuntime } from './runtime.ts';

const USAGE = `usage: tollgate [start|validate] [--config main.yaml]

  start      run the proxy (default)
  validate   check main.yaml and upstreams.yaml, print every problem, exit 1 if any

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

async function validate(path: string): Promise<number> {
  const config = await loadOrExplain(path);
  if (config === null) return 1;
  const table = compileRoutingTable(config.upstreams);
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
  const logger = createLogger(main.logLevel);
  const runtime = createRuntime(main, logger, compileRoutingTable(config.upstreams));
  const pools = new UpstreamPools(main.timeouts);
  runtime.onTableSwap((next) => pools.retainOnly(next));
  const health = createServerHealth({ logger });
  health.sync(runtime.table());
  runtime.onTableSwap((next) => health.sync(next));

  const forward = createForwarder({
    pools,
    observer: {
      onUpstreamFailure: (request, server, kind) => health.reportFailure(request.route, server, kind),
      onUpstreamSuccess: (request, server) => health.reportSuccess(request.route, server),
    },
  });
  const stages = createPipeline({ balance: createBalanceStage({ health }) });
  const proxyServer = http.createServer(
    {
      keepAliveTimeout: main.timeouts.clientKeepAliveMs,
      headersTimeout: main.timeouts.clientHeadersMs,
      // Uploads and long responses are bounded by the upstream timeouts, not by a total request timer.
      requestTimeout: 0,
    },
    createProxyHandler({
      runtime,
      stages,
      forward,
      recorder: createRequestRecorder(logger, main.accessLog),
      isTrustedProxy: createTrustTest(main.trustedProxies),
    }),
  );
  const adminServer = createAdminServer(runtime);

  try {
    await listen(adminServer, main.adminAddress, 'admin_address');
    await listen(proxyServer, main.proxyAddressHttp, 'proxy_address_http');
  } catch (error) {
    process.stderr.write(`tollgate: ${(error as Error).message}\n`);
    return 1;
  }
  runtime.phase = 'ready';
  logger.info({ hash: runtime.table().hash, routes: runtime.table().routes.length }, 'tollgate ready');

  const stop = () => {
    runtime.phase = 'draining';
    proxyServer.close();
    proxyServer.closeIdleConnections();
    adminServer.close();
    void health.close();
    void pools.close().then(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  return new Promise(() => {});
}

async function run(argv: string[]): Promise<number> {
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

run(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`tollgate: ${(error as Error).stack ?? String(error)}\n`);
    process.exitCode = 1;
  },
);
