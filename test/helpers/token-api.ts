import { once } from 'node:events';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before } from 'node:test';
import { createTokenApiServer } from '../../src/api/server.ts';
import { createLogger } from '../../src/log.ts';

export interface TokenApiUnderTest {
  server: http.Server;
  port: number;
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Every log line the server wrote. */
  lines: string[];
}

/**
 * Runs the token API server in-process on a free loopback port for the tests of one file (started
 * in `before`, closed in `after`); the returned object is filled in once it listens.
 */
export function tokenApiForTests(options: {
  masterkey: () => string | null;
  now?: () => number;
  failureLimit?: { attempts: number; windowSeconds: number };
  globalFailureLimit?: { attempts: number; windowSeconds: number };
}): TokenApiUnderTest {
  const api: TokenApiUnderTest = { server: undefined as unknown as http.Server, port: 0, url: '', lines: [] };
  before(async () => {
    api.server = createTokenApiServer({
      main: {
        maxTokenMinutes: 60,
        timeouts: {
          clientHeadersMs: 5000,
          clientKeepAliveMs: 5000,
          clientFirstByteMs: 5000,
          clientBodyIdleMs: 5000,
          clientSendMs: 5000,
          upstreamConnectMs: 1,
          upstreamResponseHeadersMs: 1,
        },
      },
      masterkey: options.masterkey,
      logger: createLogger('info', { write: (line: string) => api.lines.push(line) }),
      ...(options.now ? { now: options.now } : {}),
      ...(options.failureLimit ? { failureLimit: options.failureLimit } : {}),
      ...(options.globalFailureLimit ? { globalFailureLimit: options.globalFailureLimit } : {}),
    });
    api.server.listen(0, '127.0.0.1');
    await once(api.server, 'listening');
    api.port = (api.server.address() as AddressInfo).port;
    api.url = `http://127.0.0.1:${api.port}`;
  });
  after(() => {
    api.server.closeAllConnections();
    api.server.close();
  });
  return api;
}

export interface IssuedTokenBody {
  token: string;
  owner: string;
  expires_at: string;
  jti: string;
  scope?: string[];
}

/** POST /jwt on a running proxy; returns the status and the parsed JSON body. */
export async function postJwt(
  apiUrl: string,
  body: Record<string, unknown>,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${apiUrl}/jwt`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Issues a token that must succeed (fails the test otherwise). */
export async function mintToken(apiUrl: string, body: Record<string, unknown>): Promise<IssuedTokenBody> {
  const res = await postJwt(apiUrl, body);
  if (res.status !== 200) throw new Error(`POST /jwt answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body as unknown as IssuedTokenBody;
}

/** The value of one counter sample in a Prometheus text exposition, 0 when absent. */
export function counterValue(metrics: string, name: string, labels: string): number {
  const line = metrics.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}
