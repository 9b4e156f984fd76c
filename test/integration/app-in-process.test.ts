import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { stringify } from 'yaml';
import { createTollgate } from '../../src/app.ts';
import { loadConfig } from '../../src/config/load.ts';
import { createLogger } from '../../src/log.ts';
import { StartError } from '../../src/start-error.ts';
import { request } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/**
 * src/app.ts as a library: createTollgate(config, { clock, logger }) binds nothing until listen(),
 * which returns (and logs) the ports the kernel chose for port 0; close() drains and releases them.
 */
describe('createTollgate', () => {
  let dir: string;
  let upstream: Upstream;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tollgate-app-'));
    upstream = await startUpstream();
  });
  after(async () => {
    await upstream?.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function config(main: Record<string, unknown> = {}) {
    const servers = [upstream.address];
    await writeFile(
      join(dir, 'upstreams.yaml'),
      stringify({
        upstreams: {
          'app.test': { paths: { '/': { servers }, '/jwt': { servers, authorization: { type: 'jwt' } } } },
        },
      }),
    );
    await writeFile(
      join(dir, 'main.yaml'),
      stringify({
        proxy_address_http: '127.0.0.1:0',
        config_address: '127.0.0.1:0',
        admin_address: '127.0.0.1:0',
        upstreams_conf: join(dir, 'upstreams.yaml'),
        shutdown_delay_seconds: 0,
        ...main,
      }),
    );
    const loaded = await loadConfig(join(dir, 'main.yaml'));
    assert.ok(loaded.ok);
    return loaded.value;
  }

  const capture = () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = createLogger('info', {
      write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>),
    });
    return { lines, logger };
  };

  it('listens on the ports the kernel chose, says so in the ready line, serves, and closes', async () => {
    const { lines, logger } = capture();
    const app = createTollgate(await config(), { logger, watch: false });
    assert.throws(() => app.addresses(), /not listening yet/);
    const bound = await app.listen();
    assert.deepEqual(app.addresses(), bound);
    for (const address of [bound.proxy, bound.api, bound.admin]) assert.ok(address.port > 0);
    assert.equal(bound.proxyTls, null);
    const ready = lines.find((line) => line.msg === 'tollgate ready');
    assert.deepEqual(ready?.addresses, {
      proxy: `127.0.0.1:${bound.proxy.port}`,
      api: `127.0.0.1:${bound.api.port}`,
      admin: `127.0.0.1:${bound.admin.port}`,
    });

    const res = await request(`http://127.0.0.1:${bound.proxy.port}/x`, { headers: { host: 'app.test' } });
    assert.equal(res.status, 200);
    assert.equal((await request(`http://127.0.0.1:${bound.admin.port}/readyz`)).status, 200);

    const closing = app.close('test');
    assert.equal(app.close('again'), closing, 'one drain, however often it is asked for');
    await closing;
    for (const port of [bound.proxy.port, bound.api.port, bound.admin.port]) {
      await assert.rejects(request(`http://127.0.0.1:${port}/`), { code: 'ECONNREFUSED' });
    }
  });

  it('issues and verifies tokens on the clock it is given', async () => {
    const { logger } = capture();
    const T = Date.UTC(2030, 0, 1) / 1000;
    let now = T;
    const app = createTollgate(await config({ masterkey: 'app-clock-masterkey' }), {
      logger,
      watch: false,
      clock: () => now,
    });
    const bound = await app.listen();
    try {
      const issued = await request(`http://127.0.0.1:${bound.api.port}/jwt`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ master_key: 'app-clock-masterkey', owner: 'o', valid: 1 }),
      });
      assert.equal(issued.status, 200, issued.body);
      const { token, expires_at } = issued.json<{ token: string; expires_at: string }>();
      assert.equal(expires_at, new Date((T + 60) * 1000).toISOString());
      const use = () =>
        request(`http://127.0.0.1:${bound.proxy.port}/jwt/x`, {
          headers: { host: 'app.test', authorization: `Bearer ${token}` },
        });
      assert.equal((await use()).status, 200);
      now = T + 3600;
      const late = await use();
      assert.equal(late.status, 401);
      assert.equal(late.json<{ error: string }>().error, 'token_expired');
    } finally {
      await app.close();
    }
  });

  it('a listen failure is one StartError naming the key and the reason', async () => {
    const taken = net.createServer().listen(0, '127.0.0.1');
    await new Promise((resolve) => taken.once('listening', resolve));
    const port = (taken.address() as net.AddressInfo).port;
    try {
      const { logger } = capture();
      const app = createTollgate(await config({ admin_address: `127.0.0.1:${port}` }), {
        logger,
        watch: false,
      });
      await assert.rejects(app.listen(), (error: Error) => {
        assert.ok(error instanceof StartError);
        assert.match(
          error.message,
          /cannot listen on 127\.0\.0\.1:\d+ \(admin_address\): address already in use/,
        );
        return true;
      });
    } finally {
      taken.close();
    }
  });
});
