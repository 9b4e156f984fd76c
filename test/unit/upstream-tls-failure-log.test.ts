import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLogger } from '../../src/log.ts';
import type { UpstreamServer } from '../../src/routing/types.ts';
import { createTlsFailureLog } from '../../src/upstream/tls-failure-log.ts';

/** The rate limit of the upstream TLS failure line, on a fake clock (docs/observability.md). */

function server(address: string): UpstreamServer {
  return {
    id: address,
    address,
    origin: `https://${address}`,
    transport: {
      tls: { caFile: null, serverName: 'backend.test', certificateFile: null, keyFile: null, verify: true },
      protocol: 'auto',
      key: 'tls',
    },
    poolKey: address,
  };
}

function failure(code: string, message = `failed: ${code}`): Error {
  return Object.assign(new Error(message), { code });
}

function setup() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
  let now = 1_000_000;
  const log = createTlsFailureLog(logger, () => now, 10_000);
  return { lines, log, advance: (ms: number) => (now += ms) };
}

describe('upstream TLS failure log', () => {
  it('logs the first failure of a server and code at once, names the server, the name and the code', () => {
    const { lines, log } = setup();
    log('app.test/', server('10.0.0.1:443'), failure('UNABLE_TO_VERIFY_LEAF_SIGNATURE'));
    assert.equal(lines.length, 1);
    assert.equal(lines[0]?.level, 'warn');
    assert.equal(lines[0]?.event, 'upstream_tls_failed');
    assert.equal(lines[0]?.route, 'app.test/');
    assert.equal(lines[0]?.server, '10.0.0.1:443');
    assert.equal(lines[0]?.server_name, 'backend.test');
    assert.equal(lines[0]?.code, 'UNABLE_TO_VERIFY_LEAF_SIGNATURE');
    assert.equal(lines[0]?.reason, 'failed: UNABLE_TO_VERIFY_LEAF_SIGNATURE');
    assert.equal(lines[0]?.suppressed, undefined);
  });

  it('then one line per server and code per interval, counting the failures it left out', () => {
    const { lines, log, advance } = setup();
    const a = server('10.0.0.1:443');
    for (let i = 0; i < 5; i++) log('app.test/', a, failure('CERT_HAS_EXPIRED'));
    assert.equal(lines.length, 1);
    // Another code, or another server, is news: logged at once.
    log('app.test/', a, failure('ERR_TLS_CERT_ALTNAME_INVALID'));
    log('app.test/', server('10.0.0.2:443'), failure('CERT_HAS_EXPIRED'));
    assert.equal(lines.length, 3);
    advance(9_999);
    log('app.test/', a, failure('CERT_HAS_EXPIRED'));
    assert.equal(lines.length, 3);
    advance(1);
    log('app.test/', a, failure('CERT_HAS_EXPIRED'));
    assert.equal(lines.length, 4);
    assert.equal(lines[3]?.code, 'CERT_HAS_EXPIRED');
    assert.equal(lines[3]?.suppressed, 5, 'four after the first, one at 9.999 s');
  });
});
