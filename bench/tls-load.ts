/**
 * The client-certificate targets' load generator (bench/tls-client.ts in its own process) and what
 * they need: a client CA and a client certificate issued by it, made with `openssl` for the run.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type LoadGenerator, runTimeoutMs } from './load.ts';
import { runToCompletion } from './processes.ts';

const CLIENT = fileURLToPath(new URL('tls-client.ts', import.meta.url));

export interface ClientCredentials {
  /** The CA bundle main.yaml's `tls_client_certificates.ca_file` names. */
  caFile: string;
  certFile: string;
  keyFile: string;
}

/** A CA and a client certificate it issued (URI SAN a SPIFFE ID), in `dir`. */
export function clientCredentials(dir: string): ClientCredentials {
  const path = (name: string) => join(dir, name);
  const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl([
    'req',
    '-x509',
    ...ec,
    '-keyout',
    path('ca.key'),
    '-out',
    path('ca.crt'),
    '-days',
    '2',
    '-subj',
    '/CN=bench clients',
  ]);
  openssl([
    'req',
    '-new',
    ...ec,
    '-keyout',
    path('client.key'),
    '-out',
    path('client.csr'),
    '-subj',
    '/CN=bench-client',
  ]);
  writeFileSync(
    path('client.ext'),
    'subjectAltName=URI:spiffe://bench.local/client\nextendedKeyUsage=clientAuth\n',
  );
  openssl([
    'x509',
    '-req',
    '-in',
    path('client.csr'),
    '-CA',
    path('ca.crt'),
    '-CAkey',
    path('ca.key'),
    '-set_serial',
    '1',
    '-out',
    path('client.crt'),
    '-days',
    '2',
    '-extfile',
    path('client.ext'),
  ]);
  return { caFile: path('ca.crt'), certFile: path('client.crt'), keyFile: path('client.key') };
}

/** node:https requests, `keepalive` (on verified connections) or a new connection (handshake) each. */
export function tlsClientGenerator(
  mode: 'keepalive' | 'handshake',
  credentials: ClientCredentials | null,
): LoadGenerator {
  return {
    name: `node:https (${mode}${credentials === null ? '' : ', client certificate'})`,
    async run(settings) {
      // As many requests in flight as wrk's connections, but a handshake per request costs the
      // client as much as the server: fewer loops keep the client from being the limit.
      const connections = mode === 'handshake' ? Math.min(settings.connections, 16) : settings.connections;
      const stdout = await runToCompletion(
        process.execPath,
        [
          CLIENT,
          settings.url,
          settings.headers.host ?? 'bench.local',
          String(settings.seconds),
          String(connections),
          mode,
          ...(credentials === null ? [] : [credentials.certFile, credentials.keyFile]),
        ],
        { timeoutMs: runTimeoutMs(settings) + 10_000 },
      );
      const { requests, seconds, errors, badStatuses } = JSON.parse(stdout) as Record<string, number>;
      return {
        requestsPerSecond: Number(((requests ?? 0) / (seconds ?? 1)).toFixed(0)),
        p50Ms: Number.NaN,
        p99Ms: Number.NaN,
        p999Ms: Number.NaN,
        requests: requests ?? 0,
        socketErrors: errors ?? 0,
        badStatuses: badStatuses ?? 0,
      };
    },
  };
}

/** One GET with the client certificate: 200 expected (the runner's common check sends none). */
export async function checkWithCertificate(
  url: string,
  host: string,
  credentials: ClientCredentials,
): Promise<void> {
  const { request } = await import('node:https');
  const { readFileSync } = await import('node:fs');
  const status = await new Promise<number>((resolve, reject) => {
    const outgoing = request(url, {
      headers: { host },
      agent: false,
      rejectUnauthorized: false,
      cert: readFileSync(credentials.certFile),
      key: readFileSync(credentials.keyFile),
    });
    outgoing.setTimeout(5_000, () => outgoing.destroy(new Error(`no answer from ${url} in time`)));
    outgoing.on('error', reject);
    outgoing.on('response', (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    outgoing.end();
  });
  if (status !== 200) throw new Error(`${url} with a client certificate answered ${status}`);
}

/** Rejects unless a request without a certificate fails: the target must measure mTLS. */
export async function expectHandshakeRefused(url: string, host: string): Promise<void> {
  const { httpRequest } = await import('./http.ts');
  const refused = await httpRequest(url, { headers: { host } }).then(
    () => false,
    () => true,
  );
  if (!refused) throw new Error(`${url} answered without a client certificate`);
}
