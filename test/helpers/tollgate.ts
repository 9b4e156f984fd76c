import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { type Tollgate as App, type BoundAddresses, createTollgate } from '../../src/app.ts';
import type { Clock } from '../../src/auth/clock.ts';
import { formatIssue } from '../../src/config/issues.ts';
import { loadConfig } from '../../src/config/load.ts';
import { createLogger } from '../../src/log.ts';
import { reportDuplicateKeys } from './json-lines.ts';

export const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
export const MAIN_JS = join(ROOT, 'dist', 'main.js');

/**
 * The lowest port the kernel hands out on its own (listen on port 0, the local end of an outgoing
 * connection): /proc/sys/net/ipv4/ip_local_port_range, Linux's default where it cannot be read.
 */
const EPHEMERAL_LOW = (() => {
  try {
    return (
      Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32768
    );
  } catch {
    return 32768;
  }
})();

/**
 * A free TCP port on loopback, for a listener whose port must be known before it starts (an OpenID
 * redirect URL). Bound then released, so it is only free until someone binds it: it is drawn below
 * the kernel's ephemeral range, where no listen(0) and no outgoing connection of the tests running
 * beside this one can be given it in the meantime (seen: a proxy port taken by another file's
 * connection between this release and Tollgate's bind).
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const low = 10_000;
  const high = Math.max(low + 1_000, EPHEMERAL_LOW);
  for (let attempt = 0; attempt < 50; attempt++) {
    const candidate = low + Math.floor(Math.random() * (high - low));
    const server = net.createServer();
    const bound = await new Promise<boolean>((resolveBound) => {
      server.once('error', () => resolveBound(false));
      server.listen(candidate, host, () => resolveBound(true));
    });
    if (!bound) continue;
    await new Promise((r) => server.close(r));
    return candidate;
  }
  // Every draw taken (a crowded machine): fall back to one the kernel picks.
  const server = net.createServer();
  server.listen(0, host);
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

/** A loopback address where connections are refused, held so that nothing else can listen there. */
export interface RefusedAddress {
  readonly port: number;
  /** `127.0.0.1:port`, as written in upstreams.yaml. */
  readonly address: string;
  release(): Promise<void>;
}

/**
 * A port that refuses connections for as long as the test holds it. A port from freePort() is only
 * free until someone binds it: under --test-concurrency=2 another test's listener can take it, and a
 * "dead" server then answers. Here the port is the local end of an open loopback connection: no
 * listener can bind it (EADDRINUSE) and a new connection to it gets a RST (ECONNREFUSED).
 */
export async function refusedAddress(): Promise<RefusedAddress> {
  const holder = net.createServer();
  holder.listen(0, '127.0.0.1');
  await once(holder, 'listening');
  const accepted = once(holder, 'connection') as Promise<[net.Socket]>;
  // The local end on a port drawn below the kernel's ephemeral range (freePort): once released, no
  // other test's outgoing connection can be handed it, so a server can come back on it.
  const client = net.connect({
    host: '127.0.0.1',
    port: (holder.address() as net.AddressInfo).port,
    localAddress: '127.0.0.1',
    localPort: await freePort(),
  });
  await once(client, 'connect');
  const [serverSide] = await accepted;
  // Never what keeps a test process alive, should a test forget release().
  for (const handle of [holder, client, serverSide]) handle.unref();
  const port = client.localPort as number;
  return {
    port,
    address: `127.0.0.1:${port}`,
    async release() {
      // The side that closes first keeps TIME_WAIT: let it be the holder's, so the port is free again.
      client.ref();
      serverSide.destroy();
      await once(client, 'close');
      await new Promise((r) => holder.close(r));
    },
  };
}

export interface TollgateOptions {
  /** Extra main.yaml keys (listen addresses are filled in on loopback unless given). */
  main?: Record<string, unknown>;
  /** upstreams.yaml content: YAML text, or an object to stringify. */
  upstreams: string | Record<string, unknown>;
  env?: Record<string, string>;
  /** Use this directory instead of a fresh temp dir (it must already hold the files you want). */
  dir?: string;
  /** Where upstreams.yaml lives; defaults to `<dir>/upstreams.yaml`. */
  upstreamsPath?: string;
  /**
   * Wait for /readyz 200 (default true); `'listening'` waits only until the listeners are bound (the
   * ports are then the ones the process reports, as with `true`); `false` does not wait at all and
   * listens on port 0 without learning the ports (fit only for starts expected to fail).
   */
  waitReady?: boolean | 'listening';
  /**
   * Upper bound on the wait for readiness (default 30 s): starting Node takes seconds when the test
   * machine is busy, and the wait ends as soon as the process is ready or has exited.
   */
  readyTimeoutMs?: number;
  args?: string[];
}

/** What every started Tollgate offers, spawned or in-process. */
export interface RunningTollgate {
  readonly dir: string;
  readonly proxyPort: number;
  readonly apiPort: number;
  readonly adminPort: number;
  /** The bound `proxy_address_tls` port, when TLS is configured. */
  readonly tlsPort: number | null;
  readonly proxyUrl: string;
  readonly apiUrl: string;
  readonly adminUrl: string;
  /** Everything the process printed to stdout so far (in-process: every log line). */
  stdout(): string;
  stderr(): string;
  /** stdout parsed as JSON lines (non-JSON lines skipped). */
  logs(): Array<Record<string, unknown>>;
  /** Writes upstreams.yaml in place (not atomic: for kubelet-style swaps use test/helpers/configmap.ts). */
  writeUpstreams(content: string | Record<string, unknown>): Promise<void>;
  /** Sends a signal (default SIGTERM) and waits for the exit code; kills after 20 s. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** GET admin /metrics as text. */
  metrics(): Promise<string>;
}

/** The built proxy as a child process (`dist/main.js start`). */
export interface Tollgate extends RunningTollgate {
  readonly child: ChildProcess;
  /** Resolves with the exit code once the process has exited. */
  exited: Promise<number | null>;
}

const toYaml = (value: string | Record<string, unknown>) =>
  typeof value === 'string' ? value : stringify(value);

/** Log levels that hide the "tollgate ready" info line; readiness then rests on /readyz alone. */
const QUIET_LEVELS = new Set(['warn', 'error', 'fatal', 'silent']);

/** A start that failed only because a port chosen here was taken meanwhile (freePort releases it). */
class PortTakenError extends Error {}

/**
 * Starts the built proxy (dist/main.js) as a child process with a config written to a temp dir.
 *
 * freePort() releases its port before the child binds it, so on a busy machine (tests run two files
 * at once) another listener can take it in between. Such a start is retried on fresh ports, a bounded
 * number of times; any other failure is reported as it is.
 */
export async function startTollgate(options: TollgateOptions): Promise<Tollgate> {
  const attempts = options.waitReady === false ? 1 : 3;
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options);
    } catch (error) {
      if (!(error instanceof PortTakenError) || attempt >= attempts) throw error;
    }
  }
}

/**
 * Starts several processes at once. If any fails to start, the ones that did are stopped before the
 * error is thrown: with a bare Promise.all a started sibling would be left running, its pipes keeping
 * the test runner alive after the failure.
 */
export async function startTollgates<const T extends TollgateOptions[]>(
  ...all: T
): Promise<{ [K in keyof T]: Tollgate }> {
  const settled = await Promise.allSettled(all.map((options) => startTollgate(options)));
  const failure = settled.find((result) => result.status === 'rejected');
  if (failure === undefined) {
    const started = settled.map((result) => (result as PromiseFulfilledResult<Tollgate>).value);
    return started as unknown as { [K in keyof T]: Tollgate };
  }
  await Promise.all(
    settled.map((result) => (result.status === 'fulfilled' ? result.value.stop('SIGKILL') : null)),
  );
  throw failure.reason;
}

/** Writes main.yaml (listeners on loopback unless given) and upstreams.yaml into the test's dir. */
async function writeConfig(
  options: Pick<TollgateOptions, 'main' | 'upstreams' | 'dir' | 'upstreamsPath'>,
  ports: { proxy: number; api: number; admin: number },
): Promise<{ dir: string; mainPath: string; upstreamsPath: string }> {
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'tollgate-test-')));
  const upstreamsPath = options.upstreamsPath ?? join(dir, 'upstreams.yaml');
  const main = {
    proxy_address_http: `127.0.0.1:${ports.proxy}`,
    config_address: `127.0.0.1:${ports.api}`,
    admin_address: `127.0.0.1:${ports.admin}`,
    upstreams_conf: upstreamsPath,
    shutdown_delay_seconds: 0,
    shutdown_grace_seconds: 5,
    ...options.main,
  };
  const mainPath = join(dir, 'main.yaml');
  await writeFile(mainPath, stringify(main));
  if (!options.upstreamsPath) await writeFile(upstreamsPath, toYaml(options.upstreams));
  return { dir, mainPath, upstreamsPath };
}

/** The port of a `host:port` / `[v6]:port` address as logged in the ready line. */
const portOf = (address: unknown) => Number(String(address).slice(String(address).lastIndexOf(':') + 1));

async function startOnce(options: TollgateOptions): Promise<Tollgate> {
  const quiet = QUIET_LEVELS.has(String(options.main?.log_level ?? 'info'));
  // The ready line names the ports the kernel chose, so port 0 needs no free-port race. Without it
  // (no wait, or a log level that hides it) the ports must be known up front.
  const readPortsFromLog = options.waitReady !== false && !quiet;
  // A start nobody waits for is one expected to fail: port 0 leaves it nothing to race for (a port
  // chosen here could be taken by another suite before the child binds it, failing it for the wrong
  // reason), and its ports are never used.
  const noWait = options.waitReady === false;
  if (options.waitReady === 'listening' && quiet) {
    throw new Error("waitReady: 'listening' reads the listen line, which a quiet log_level hides");
  }
  const fixed =
    readPortsFromLog || noWait
      ? { proxy: 0, api: 0, admin: 0 }
      : { proxy: await freePort(), api: await freePort(), admin: await freePort() };
  const { dir, mainPath, upstreamsPath } = await writeConfig(options, fixed);
  let proxyPort = fixed.proxy;
  let apiPort = fixed.api;
  let adminPort = fixed.admin;
  let tlsPort: number | null = null;

  const child = spawn(process.execPath, [MAIN_JS, 'start', '--config', mainPath, ...(options.args ?? [])], {
    env: { ...process.env, TOLLGATE_CONFIG: '', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => {
    out += d;
  });
  child.stderr?.setEncoding('utf8').on('data', (d: string) => {
    err += d;
  });
  const exited = new Promise<number | null>((resolveExit) => {
    child.once('exit', (code, signal) => resolveExit(code ?? (signal ? 128 : null)));
  });

  const host = (port: number) => `http://127.0.0.1:${port}`;
  const tollgate: Tollgate = {
    dir,
    child,
    get proxyPort() {
      return proxyPort;
    },
    get apiPort() {
      return apiPort;
    },
    get adminPort() {
      return adminPort;
    },
    get tlsPort() {
      return tlsPort;
    },
    get proxyUrl() {
      return host(proxyPort);
    },
    get apiUrl() {
      return host(apiPort);
    },
    get adminUrl() {
      return host(adminPort);
    },
    stdout: () => out,
    stderr: () => err,
    logs: () => parseLogLines(out),
    exited,
    writeUpstreams: (content) => writeFile(upstreamsPath, toYaml(content)),
    async stop(signal = 'SIGTERM') {
      let code: number | null;
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(signal);
        const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
        code = await exited;
        clearTimeout(timer);
      } else {
        code = await exited;
      }
      // Also when the child had already exited (a failed start, a test's own signal): no temp dir left.
      if (!options.dir) await rm(dir, { recursive: true, force: true });
      // Every line every process test produced: log pipelines keep one of two equal keys.
      reportDuplicateKeys(out, 'tollgate');
      return code;
    },
    metrics: async () => (await fetch(`${host(adminPort)}/metrics`)).text(),
  };

  if (options.waitReady !== false) {
    // A 200 on adminPort alone does not prove it is this child answering: if the port was taken
    // between freePort() and the child's bind, another proxy's admin port (or an echo upstream)
    // answers while this child is exiting with EADDRINUSE. The child's own "tollgate ready" line,
    // logged once every listener is bound, does, and names the ports it bound.
    // Both lines name the bound addresses; the second comes while a Kubernetes sync holds readiness.
    const listenLines = new Set([
      'tollgate ready',
      'waiting for the first Kubernetes sync before reporting ready',
    ]);
    const listening = options.waitReady === 'listening';
    const saidReady = () => {
      if (quiet) return true;
      const ready = parseLogLines(out).find((line) =>
        listening ? listenLines.has(String(line.msg)) : line.msg === 'tollgate ready',
      );
      if (ready === undefined) return false;
      const addresses = ready.addresses as Record<string, string>;
      proxyPort = portOf(addresses.proxy);
      apiPort = portOf(addresses.api);
      adminPort = portOf(addresses.admin);
      tlsPort = addresses.proxy_tls === undefined ? null : portOf(addresses.proxy_tls);
      return true;
    };
    try {
      await waitFor(
        async () => saidReady() && (listening || (await fetch(`${tollgate.adminUrl}/readyz`)).status === 200),
        options.readyTimeoutMs ?? 30_000,
        () => (child.exitCode !== null ? `tollgate exited with ${child.exitCode}: ${err}${out}` : null),
      );
    } catch (error) {
      child.kill('SIGKILL');
      await exited;
      if (!options.dir) await rm(dir, { recursive: true, force: true });
      const ours = [fixed.proxy, fixed.api, fixed.admin].map((port) => `cannot listen on 127.0.0.1:${port} `);
      const message = `tollgate did not become ready: ${(error as Error).message}\n${err}\n${out}`;
      if (ours.some((prefix) => err.includes(prefix)) && err.includes('address already in use')) {
        throw new PortTakenError(message);
      }
      throw new Error(message);
    }
  }
  return tollgate;
}

function parseLogLines(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
}

export interface InProcessOptions
  extends Pick<TollgateOptions, 'main' | 'upstreams' | 'dir' | 'upstreamsPath'> {
  /** Token clock (seconds since the epoch), e.g. one running ahead to see tokens expire. */
  clock?: Clock;
  /** Watch the config files (default true, as the real process does). */
  watch?: boolean;
}

/** The app of src/app.ts in this test process: no spawn, ports chosen by the kernel. */
export interface InProcessTollgate extends RunningTollgate {
  readonly app: App;
  /** Checks the config files now (what SIGHUP does) and resolves once the check is done. */
  reload(): Promise<void>;
}

/**
 * Starts Tollgate inside the test process (createTollgate + listen on port 0): for tests that need
 * no process boundary (signals, exit codes, the CLI, environment variables keep startTollgate).
 * Metrics live in one registry per process, so tests sharing a file should compare deltas.
 */
export async function startInProcess(options: InProcessOptions): Promise<InProcessTollgate> {
  const { dir, mainPath, upstreamsPath } = await writeConfig(options, { proxy: 0, api: 0, admin: 0 });
  const loaded = await loadConfig(mainPath);
  if (!loaded.ok) {
    if (!options.dir) await rm(dir, { recursive: true, force: true });
    throw new Error(`invalid test config:\n${loaded.issues.map(formatIssue).join('\n')}`);
  }
  let out = '';
  const logger = createLogger(loaded.value.main.logLevel, {
    write: (line: string) => {
      out += line;
    },
  });
  const app = createTollgate(loaded.value, { clock: options.clock, logger, watch: options.watch });
  let bound: BoundAddresses;
  try {
    bound = await app.listen();
  } catch (error) {
    if (!options.dir) await rm(dir, { recursive: true, force: true });
    throw error;
  }
  const url = (port: number) => `http://127.0.0.1:${port}`;
  return {
    app,
    dir,
    proxyPort: bound.proxy.port,
    apiPort: bound.api.port,
    adminPort: bound.admin.port,
    tlsPort: bound.proxyTls?.port ?? null,
    proxyUrl: url(bound.proxy.port),
    apiUrl: url(bound.api.port),
    adminUrl: url(bound.admin.port),
    stdout: () => out,
    stderr: () => '',
    logs: () => parseLogLines(out),
    writeUpstreams: (content) => writeFile(upstreamsPath, toYaml(content)),
    reload: () => app.reload('test'),
    async stop() {
      await app.close('test');
      if (!options.dir) await rm(dir, { recursive: true, force: true });
      reportDuplicateKeys(out, 'tollgate (in process)');
      return 0;
    },
    metrics: async () => (await fetch(`${url(bound.admin.port)}/metrics`)).text(),
  };
}

/**
 * Polls `check` until it returns true. `fatal` may return a message to stop waiting early
 * (e.g. the process died). Throws after `timeoutMs`.
 */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 5_000,
  fatal: () => string | null = () => null,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const reason = fatal();
    if (reason) throw new Error(reason);
    try {
      if (await check()) return;
    } catch {
      // not yet: connection refused while starting, etc.
    }
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export interface SimpleResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  json<T = Record<string, unknown>>(): T;
}

/**
 * One HTTP request with node:http (not fetch: fetch forbids setting Host, and tests need raw paths
 * such as `/a/../b` sent exactly as written).
 */
export async function request(
  url: string,
  options: {
    method?: string | undefined;
    headers?: Record<string, string> | undefined;
    body?: string | Buffer | undefined;
    path?: string | undefined;
    localAddress?: string | undefined;
  } = {},
): Promise<SimpleResponse> {
  const { default: http } = await import('node:http');
  const target = new URL(url);
  return new Promise((resolveResponse, reject) => {
    const req = http.request(
      {
        host: target.hostname,
        port: target.port,
        method: options.method ?? 'GET',
        path: options.path ?? `${target.pathname}${target.search}`,
        headers: options.headers,
        agent: false,
        localAddress: options.localAddress,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          body += d;
        });
        res.on('end', () =>
          resolveResponse({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body,
            json: <T>() => JSON.parse(body) as T,
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}
