/**
 * Tollgate as a bench target: the built dist/main.js with a temp config routing `bench.local` to the
 * upstream, once without auth (`/`) and once behind JWT (`/jwt`), plus a token from its token API.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createBenchIssuer, issuerRouteYaml } from './external-issuer.ts';
import { httpRequest, waitForHttp } from './http.ts';
import { freePort, makeTempDir, type Started, startProcess } from './processes.ts';

export const BENCH_HOST = 'bench.local';
export const MAIN_JS = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');

export interface RunningTollgate {
  readonly process: Started;
  readonly proxyPort: number;
  readonly apiPort: number;
  readonly masterkey: string;
  /** A token of the external issuer that `/issuer` trusts. */
  readonly issuerToken: string;
}

export function tollgateBuilt(): boolean {
  return existsSync(MAIN_JS);
}

export interface TollgateSetup {
  /** main.yaml `workers` (1: the single process). */
  workers?: number;
  /** How workers share the port (docs/workers.md): SO_REUSEPORT by default, or the cluster module. */
  spreading?: 'reuseport' | 'cluster';
}

/**
 * Access log off and log level warn: the reference nginx runs with `access_log off` too, so neither
 * side pays for a log line per request.
 */
export async function startTollgate(
  upstreamPort: number,
  setup: TollgateSetup = {},
): Promise<RunningTollgate> {
  const workers = setup.workers ?? 1;
  const dir = makeTempDir('tollgate-bench-tollgate-');
  const [proxyPort, apiPort, adminPort] = [await freePort(), await freePort(), await freePort()];
  const masterkey = randomBytes(24).toString('base64url');
  writeFileSync(
    join(dir, 'main.yaml'),
    [
      `proxy_address_http: "127.0.0.1:${proxyPort}"`,
      `config_address: "127.0.0.1:${apiPort}"`,
      `admin_address: "127.0.0.1:${adminPort}"`,
      'log_level: warn',
      'access_log: false',
      `masterkey: "${masterkey}"`,
      `workers: ${workers}`,
      '',
    ].join('\n'),
  );
  const server = `"127.0.0.1:${upstreamPort}"`;
  const issuer = await createBenchIssuer(dir);
  writeFileSync(
    join(dir, 'upstreams.yaml'),
    [
      'upstreams:',
      `  "${BENCH_HOST}":`,
      '    paths:',
      '      "/":',
      `        servers: [${server}]`,
      '      "/jwt":',
      `        servers: [${server}]`,
      '        authorization:',
      '          type: jwt',
      ...issuerRouteYaml(server, issuer.jwksFile),
      '',
    ].join('\n'),
  );
  const started = startProcess(
    workers === 1 ? 'tollgate' : `tollgate (${workers} workers)`,
    process.execPath,
    [MAIN_JS, 'start', '--config', join(dir, 'main.yaml')],
    { ...process.env, TOLLGATE_WORKER_SPREAD: setup.spreading ?? 'reuseport' },
  );
  await waitForHttp(`http://127.0.0.1:${adminPort}/readyz`, started);
  return { process: started, proxyPort, apiPort, masterkey, issuerToken: issuer.token };
}

/** A token from the token API, reused for every request of the JWT run. */
export async function issueToken(tollgate: RunningTollgate): Promise<string> {
  const { status, body } = await httpRequest(`http://127.0.0.1:${tollgate.apiPort}/jwt`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ master_key: tollgate.masterkey, owner: 'bench', valid: 60 }),
  });
  const text = body.toString('utf8');
  if (status !== 200) throw new Error(`token API answered ${status}: ${text}`);
  const { token } = JSON.parse(text) as { token?: unknown };
  if (typeof token !== 'string') throw new Error(`token API answered without a token: ${text}`);
  return token;
}
