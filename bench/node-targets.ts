/**
 * The Node processes of the bench other than Tollgate: the two reference proxies (bench/reference/
 * undici-proxy.ts, http-proxy-3-proxy.ts) and the optional Node upstream (node-upstream.ts). Each runs
 * as a .ts file on the same pinned Node as Tollgate (process.execPath; type stripping only costs at
 * load), so the comparison is between proxies, not between Node versions.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitForHttp } from './http.ts';
import { freePort, type Started, startProcess } from './processes.ts';

const REFERENCE_DIR = join(dirname(fileURLToPath(import.meta.url)), 'reference');

export const REFERENCE_PROXIES = {
  'undici-minimal': 'undici-proxy.ts',
  'http-proxy-3': 'http-proxy-3-proxy.ts',
} as const;
export type ReferenceProxyId = keyof typeof REFERENCE_PROXIES;

function startScript(name: string, script: string, args: string[]): Started {
  return startProcess(name, process.execPath, [join(REFERENCE_DIR, script), ...args]);
}

/** Starts one reference proxy in front of `upstreamPort`; resolves with its port once it answers. */
export async function startReferenceProxy(
  id: ReferenceProxyId,
  upstreamPort: number,
): Promise<{ port: number; started: Started }> {
  const port = await freePort();
  const started = startScript(id, REFERENCE_PROXIES[id], [String(port), `http://127.0.0.1:${upstreamPort}`]);
  await waitForHttp(`http://127.0.0.1:${port}/`, started);
  return { port, started };
}

/**
 * `copies` minimal undici proxies sharing one port through SO_REUSEPORT: what N Node processes reach
 * with no work of their own, the ceiling for Tollgate with N workers. Resolves with the port.
 */
export async function startSharedUndiciProxies(
  upstreamPort: number,
  copies: number,
): Promise<{ port: number; started: Started[] }> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${upstreamPort}`;
  const script = REFERENCE_PROXIES['undici-minimal'];
  const all: Started[] = [];
  for (let copy = 1; copy <= copies; copy += 1) {
    const started = startScript(`undici-minimal #${copy}`, script, [String(port), origin, 'reuseport']);
    all.push(started);
    // One at a time: a copy answering proves it is bound before the next one joins the port.
    await waitForHttp(`http://127.0.0.1:${port}/`, started);
  }
  return { port, started: all };
}

/** Starts the single-process Node upstream (BENCH_UPSTREAM=node) and waits until it answers. */
export async function startNodeUpstream(port: number): Promise<Started> {
  const started = startScript('node-upstream', 'node-upstream.ts', [String(port)]);
  await waitForHttp(`http://127.0.0.1:${port}/`, started);
  return started;
}

/** Starts the forward-auth service of the `tollgate-forward` target and waits until it answers. */
export async function startBenchAuthService(): Promise<{ port: number; started: Started }> {
  const port = await freePort();
  const started = startScript('auth-service', 'auth-service.ts', [String(port)]);
  await waitForHttp(`http://127.0.0.1:${port}/ping`, started);
  return { port, started };
}

/** Starts the trace collector sink of the `tollgate-tracing` target and waits until it answers. */
export async function startOtlpSink(): Promise<{ port: number; started: Started }> {
  const port = await freePort();
  const started = startScript('otlp-sink', 'otlp-sink.ts', [String(port)]);
  await waitForHttp(`http://127.0.0.1:${port}/ping`, started);
  return { port, started };
}

/** Starts the Envoy ext_authz service of the `tollgate-ext-authz` target and waits until it listens. */
export async function startBenchExtAuthzService(): Promise<{ port: number; started: Started }> {
  const port = await freePort();
  const started = startScript('ext-authz-service', 'ext-authz-service.ts', [String(port)]);
  const deadline = Date.now() + 15_000;
  while (!started.output().includes('listening')) {
    if (Date.now() > deadline) throw new Error(`the ext_authz service did not start:\n${started.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { port, started };
}
