import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { test } from 'node:test';
import { createApiKeyAuthenticator } from '../../src/auth/apikey.ts';
import { createBasicAuthenticator } from '../../src/auth/basic.ts';
import type { AuthorizationConfig } from '../../src/config/types.ts';
import type { ProxyRequest } from '../../src/request/record.ts';

/** Hostile spellings of basic and apikey credentials, straight against the authenticators. */

function request(headers: IncomingHttpHeaders): ProxyRequest {
  return { req: { headers }, subject: null, consumedHeaders: [] } as unknown as ProxyRequest;
}
const basicHeader = (raw: string | Buffer) => ({
  authorization: `Basic ${Buffer.from(raw).toString('base64')}`,
});

const basic = createBasicAuthenticator({
  type: 'basic',
  users: [{ username: 'admin', password: 'pa:ss:word', passwordHash: null }],
  keys: [],
} satisfies AuthorizationConfig);

test('basic: the user ends at the first colon, so a password may contain colons and a user may not', () => {
  const ok = request(basicHeader('admin:pa:ss:word'));
  assert.equal(basic(ok), null);
  assert.equal(ok.subject, 'admin');
  assert.deepEqual(ok.consumedHeaders, ['authorization']);
  for (const raw of ['admin:pa', 'admin:pa:ss', 'admin:pa:ss:word:', 'admin:pa', 'admin:ss:word']) {
    assert.equal(basic(request(basicHeader(raw))), 'invalid_credentials', raw);
  }
});

test('basic: empty user, empty password, no colon, bad base64 and other schemes never pass', () => {
  for (const raw of [':pa:ss:word', 'admin:', ':', 'adminpa:ss:word', 'admin']) {
    const req = request(basicHeader(raw));
    assert.equal(basic(req), 'invalid_credentials', raw);
    assert.equal(req.subject, null, raw);
    assert.deepEqual(req.consumedHeaders, [], raw);
  }
  for (const authorization of [
    'Basic',
    'Basic ',
    'Basic !!!',
    'Basic YWRtaW46cGE6c3M6d29yZA==x',
    'Basic a=b=',
  ]) {
    // Node trims header values, so 'Basic ' arrives as 'Basic' (missing); either way, refused.
    const req = request({ authorization });
    assert.notEqual(basic(req), null, authorization);
    assert.equal(req.subject, null, authorization);
  }
  for (const authorization of ['Bearer YWRtaW46cGE6c3M6d29yZA==', 'BasicYWRtaW46cGE6c3M6d29yZA==', '']) {
    assert.equal(basic(request({ authorization })), 'missing_credentials', authorization);
  }
});

test('basic: non-UTF-8 bytes never match a configured password', () => {
  const latin1 = Buffer.concat([Buffer.from('admin:pa:ss:w'), Buffer.from([0xf6]), Buffer.from('rd')]);
  assert.equal(basic(request(basicHeader(latin1))), 'invalid_credentials');
  const truncated = Buffer.concat([Buffer.from('admin:pa:ss:word'), Buffer.from([0xc3])]);
  assert.equal(basic(request(basicHeader(truncated))), 'invalid_credentials');
});

test('apikey: a repeated x-api-key (joined by Node) or an array never matches, even when both copies are right', () => {
  const apikey = createApiKeyAuthenticator({
    type: 'apikey',
    users: [],
    keys: [{ name: 'ci', key: 'k-1' }],
  } satisfies AuthorizationConfig);
  for (const given of ['k-1, k-1', 'k-1,k-1', ' k-1x', 'K-1']) {
    assert.equal(apikey(request({ 'x-api-key': given })), 'invalid_credentials', given);
  }
  assert.equal(apikey(request({ 'x-api-key': ['k-1', 'k-1'] as unknown as string })), 'invalid_credentials');
  const ok = request({ 'x-api-key': 'k-1' });
  assert.equal(apikey(ok), null);
  assert.equal(ok.subject, 'ci');
});
