import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { createLogger } from '../../src/log.ts';
import { duplicateKeys, linesWithDuplicateKeys } from '../helpers/json-lines.ts';

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { logger: createLogger('info', stream), lines };
}

describe('log redaction', () => {
  it('censors every declared credential path and keeps the rest of the line', () => {
    const { logger, lines } = capture();
    logger.info(
      {
        headers: {
          authorization: 'Bearer eyJ-secret-token',
          'x-api-key': 'secret-key',
          cookie: 'session=secret-cookie',
          'proxy-authorization': 'Basic c2VjcmV0',
          accept: 'text/html',
        },
        master_key: 'secret-master',
        masterkey: 'secret-master-2',
        password: 'secret-password',
        token: 'secret-jwt',
        creds: 'user:secret-creds',
        route: 'app.test/',
      },
      'something happened',
    );
    assert.equal(lines.length, 1);
    const line = lines[0] ?? '';
    assert.doesNotMatch(line, /secret/);
    const parsed = JSON.parse(line) as Record<string, unknown> & { headers: Record<string, string> };
    assert.equal(parsed.headers.authorization, '[redacted]');
    assert.equal(parsed.headers['x-api-key'], '[redacted]');
    assert.equal(parsed.headers.accept, 'text/html');
    assert.equal(parsed.route, 'app.test/');
    assert.equal(parsed.msg, 'something happened');
    assert.equal(parsed.level, 'info');
  });
});

describe('duplicate keys in log lines', () => {
  it('a field named like a base field gives pino two keys in one line; the check used on every process test finds it', () => {
    const { logger, lines } = capture();
    logger.warn({ service: 'shop.apps' }, 'a field that collides with the base `service`');
    logger.info({ kubernetes_service: 'shop.apps', nested: { a: 1, b: { a: 2 } } }, 'no collision');
    assert.deepEqual(duplicateKeys(lines[0] ?? ''), ['service']);
    assert.deepEqual(duplicateKeys(lines[1] ?? ''), []);
    assert.deepEqual(duplicateKeys('{"a":{"b":1,"b":2},"c":[{"d":"x\\"","d":1}]}'), ['a.b', 'c.0.d']);
    assert.equal(linesWithDuplicateKeys(lines.join('')).length, 1);
  });
});
