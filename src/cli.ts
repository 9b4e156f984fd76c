import cluster from 'node:cluster';
import { parseArgs } from 'node:util';
import { createTollgate, type Tollgate } from './app.ts';
import { runHashPassword } from './auth/hash-password-cli.ts';
import { runTokenCommand } from './auth/token-cli.ts';
import { formatIssue } from './config/issues.ts';
import { loadConfig, waitsForConfigMap } from './config/load.ts';
import { releaseParseMemorySoon } from './config/parse-memory.ts';
import { prepareConfig, type TollgateConfig } from './control-plane/prepare.ts';
import { abandonLogs } from './log.ts';
import { captureSignals, type ProcessSignals } from './signals.ts';
import { describeKubernetesUse } from './sources/kubernetes/use.ts';
import { StartError } from './start-error.ts';
import { resolveWorkerCount } from './workers/count.ts';
import { serveWorkers } from './workers/serve.ts';
import { runWorker } from './workers/worker.ts';

const USAGE = `usage: tollgate [start|validate] [--config main.yaml]
       tollgate hash-password < password
       tollgate token --owner NAME --valid MINUTES [--scope S]... [--config main.yaml]

  start          run the proxy (default)
  validate       check main.yaml and upstreams.yaml, print every problem, exit 1 if any
  hash-password  print a scrypt hash of the password read on stdin, for a basic-auth password_hash
  token          print a token signed with the configured masterkey (docs/tokens.md)

--config falls back to $TOLLGATE_CONFIG, then ./main.yaml`;

/**
 * Runs one command line and resolves with the process exit code: 0 done, 1 failed (config, listen),
 * 2 usage error. `start` resolves only once the proxy has shut down.
 */
export async function runCli(argv: string[]): Promise<number> {
  // A worker forked by the primary (docs/workers.md) gets its config from the primary, not from argv.
  if (cluster.isWorker) return runWorker();
  // Its own options (--log-n), so it is dispatched before the start/validate parser.
  if (argv[0] === 'hash-password') return runHashPassword(argv.slice(1));
  if (argv[0] === 'token') return runTokenCommand(argv.slice(1));
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

function configPath(value: string | undefined): string {
  return value || process.env.TOLLGATE_CONFIG || 'main.yaml';
}

async function loadOrExplain(path: string): Promise<TollgateConfig | null> {
  const loaded = await loadConfig(path);
  if (loaded.ok) return loaded.value;
  for (const issue of loaded.issues) process.stderr.write(`${formatIssue(issue)}\n`);
  process.stderr.write(`${loaded.issues.length} problem${loaded.issues.length === 1 ? '' : 's'} found\n`);
  return null;
}

async function validate(path: string): Promise<number> {
  const config = await loadOrExplain(path);
  if (config === null) return 1;
  let prepared: ReturnType<typeof prepareConfig>;
  try {
    prepared = prepareConfig(config);
  } catch (error) {
    if (!(error instanceof StartError)) throw error;
    process.stderr.write(`${error.message}\n`);
    return 1;
  }
  for (const warning of prepared.warnings) process.stderr.write(`warning: ${warning}\n`);
  if (waitsForConfigMap(config.upstreams)) {
    process.stdout.write(
      `valid: ${config.main.file}; ${config.upstreams.file} is not there, so start reads upstreams.yaml ` +
        `from ConfigMap ${config.main.kubernetes?.upstreamsConfigMap} and is not ready before\n`,
    );
  } else {
    process.stdout.write(
      `valid: ${config.main.file} and ${config.upstreams.file}: ${config.upstreams.hosts.length} hosts, ` +
        `${prepared.table.routes.length} routes, ${prepared.table.servers.length} servers\n`,
    );
  }
  // Offline: says what a start would ask the API for, without contacting it.
  for (const line of describeKubernetesUse(config.main, config.upstreams)) process.stdout.write(`${line}\n`);
  return 0;
}

/**
 * What `start` serves once the config is loaded; resolves with the exit code when it has stopped.
 * The one place that turns a config into a running proxy for this process.
 */
export type Serve = (config: TollgateConfig, signals: ProcessSignals) => Promise<number>;

/** `workers: 1` is the single process; more make this process their primary (docs/workers.md). */
const serveByWorkers: Serve = (config, signals) => {
  const workers = resolveWorkerCount(config.main.workers);
  return workers > 1 ? serveWorkers(config, signals, workers) : serveOneProcess(config, signals);
};

async function start(path: string, serve: Serve = serveByWorkers): Promise<number> {
  const signals = captureSignals();
  const config = await loadOrExplain(path);
  if (config === null) return 1;
  if (signals.stopping !== null) return 0;
  // Runs once serve() has compiled the table: a large file's parse leaves no high-water RSS behind.
  releaseParseMemorySoon();
  return serve(config, signals);
}

/** One process serving every listener: the proxy as a single Node process. */
async function serveOneProcess(config: TollgateConfig, signals: ProcessSignals): Promise<number> {
  let app: Tollgate;
  try {
    app = createTollgate(config);
  } catch (error) {
    if (!(error instanceof StartError)) throw error;
    process.stderr.write(`${error.message}\n`);
    return 1;
  }
  const { logger } = app;
  const forced = signals.forcedExit.then((code) => {
    logger.warn({ exit_code: code }, 'second signal during shutdown; exiting now');
    // At once: what stdout has not taken by now is given up, never waited for.
    logger.flush();
    abandonLogs(logger);
    return code;
  });
  signals.onReload(() => {
    app.reload('SIGHUP');
  });
  try {
    await app.listen();
  } catch (error) {
    if (!(error instanceof StartError)) throw error;
    process.stderr.write(`${error.message}\n`);
    return 1;
  }
  // Registered once listening, so a signal that arrived during listen() drains a complete app.
  const stopped = new Promise<number>((resolve) => {
    signals.onStop((signal) =>
      app.close(signal).then(
        () => resolve(0),
        (error: unknown) => {
          logger.error({ err: error }, 'graceful shutdown failed; exiting');
          resolve(1);
        },
      ),
    );
  });
  return Promise.race([stopped, forced]);
}
