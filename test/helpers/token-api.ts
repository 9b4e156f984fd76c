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
          upstreamConnectMs: 1,
          upstreamResponseHeadersMs: 1,
        },
      },
      masterkey: options.masterkey,
      logger: createLogger('info', { write: (line: string) => api.lines.push(line) }),
      ...(options.now ? { now: options.now } : {}),
      ...(options.failureLimit ? { failureLimit: options.failureLimit } : {}),
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
