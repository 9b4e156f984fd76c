import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { test } from 'node:test';
import { hashPassword } from '../../src/auth/password.ts';
import { deriveSigningKey, issueToken } from '../../src/auth/tokens.ts';
import type { AuthorizationConfig } from '../../src/config/types.ts';
import { createLogger } from '../../src/log.ts';
import { authFailuresTotal } from '../../src/observe/metrics.ts';
import { createAuthStage } from '../../src/pipeline/4-auth.ts';
import { PASS } from '../../src/pipeline/verdict.ts';
import type { ProxyRequest } from '../../src/request/record.ts';
import type { Answer, Verdict } from '../../src/request/verdict.ts';
import type { Route } from '../../src/routing/types.ts';

const MASTERKEY = 'stage-test-masterkey';
const T0 = 1_800_000_000;

function harness(options: { masterkey?: string | null; tokenParam?: string } = {}) {
  const lines: string[] = [];
  const logger = createLogger('info', { write: (line: string) => lines.push(line) });
  let now = T0;
  let masterkey = options.masterkey === undefined ? MASTERKEY : options.masterkey;
  const { stage } = createAuthStage({
    tokenParam: options.tokenParam ?? 'tollgatetoken',
    masterkey: () => masterkey,
    logger,
    now: () => now,
  });
  return {
    stage,
    lines,
    setNow: (value: number) => {
      now = value;
    },
    setMasterkey: (value: string | null) => {
      masterkey = value;
    },
  };
}

function request(auth: AuthorizationConfig | null, headers: IncomingHttpHeaders = {}, query = '') {
  const route = { id: 'example.com/api', auth } as Route;
  const proxyRequest = {
    req: { headers },
    route,
    host: 'example.com',
    path: '/api/x',
    query,
    clientIp: '127.0.0.1',
    subject: null,
    forwardQuery: query,
    consumedHeaders: [],
  } as unknown as ProxyRequest;
  return { proxyRequest };
}

/** The answer a stage decided on (failing the test if it passed the request on). */
function answerOf(verdict: Verdict | Promise<Verdict>): Answer {
  assert.ok(!(verdict instanceof Promise), 'expected a synchronous verdict');
  assert.equal(verdict.kind, 'answer');
  return verdict as Answer;
}

const basicHeader = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const errorCode = (answer: Answer) => (JSON.parse(String(answer.body)) as { error: string }).error;

async function failures(method: string, reason: string): Promise<number> {
  const metric = await authFailuresTotal.get();
  return metric.values.find((v) => v.labels.method === method && v.labels.reason === reason)?.value ?? 0;
}

const plainBasic: AuthorizationConfig = Object.freeze({
  type: 'basic',
  users: [
    { username: 'alice', password: 'wonderland', passwordHash: null },
    { username: 'zoë', password: 'ümlaut', passwordHash: null },
  ],
  keys: [],
});

test('a route without a policy passes; only a token parameter is taken out of what is forwarded', () => {
  const { stage } = harness();
  const { proxyRequest } = request(null, { authorization: 'Basic Zm9vOmJhcg==' }, 'a=1&tollgatetoken=x');
  assert.equal(stage(proxyRequest), PASS);
  assert.equal(proxyRequest.subject, null);
  assert.deepEqual(proxyRequest.consumedHeaders, []);
  assert.equal(proxyRequest.forwardQuery, 'a=1');
});

test('basic with plain passwords: accepted synchronously, the header consumed, the user the subject', () => {
  const { stage } = harness();
  const { proxyRequest } = request(plainBasic, { authorization: basicHeader('alice', 'wonderland') });
  assert.equal(stage(proxyRequest), PASS);
  assert.equal(proxyRequest.subject, 'alice');
  assert.deepEqual(proxyRequest.consumedHeaders, ['authorization']);
});

test('basic: a non-ASCII user name becomes a percent-encoded subject', () => {
  const { stage } = harness();
  const { proxyRequest } = request(plainBasic, { authorization: basicHeader('zoë', 'ümlaut') });
  assert.equal(stage(proxyRequest), PASS);
  assert.equal(proxyRequest.subject, 'zo%C3%AB');
});

test('basic refusals: 401, the Basic challenge, a reason code, a metric, a log line without the secret', async () => {
  const { stage, lines } = harness();
  const before = await failures('basic', 'invalid_credentials');
  const cases: Array<[IncomingHttpHeaders, string]> = [
    [{}, 'missing_credentials'],
    [{ authorization: 'Bearer abc.def.ghi' }, 'missing_credentials'],
    [{ authorization: basicHeader('alice', 'wrong-password-1') }, 'invalid_credentials'],
    [{ authorization: basicHeader('mallory', 'wonderland') }, 'invalid_credentials'],
    [{ authorization: basicHeader('alice', '') }, 'invalid_credentials'],
    [{ authorization: 'Basic !!!not-base64' }, 'invalid_credentials'],
    [{ authorization: `Basic ${Buffer.from('no-colon').toString('base64')}` }, 'invalid_credentials'],
  ];
  for (const [headers, reason] of cases) {
    const { proxyRequest } = request(plainBasic, headers);
    const res = answerOf(stage(proxyRequest));
    assert.equal(res.status, 401);
    assert.equal(res.headers['www-authenticate'], 'Basic realm="tollgate", charset="UTF-8"');
    assert.equal(errorCode(res), reason, JSON.stringify(headers));
    assert.equal(proxyRequest.subject, null);
  }
  assert.equal(await failures('basic', 'invalid_credentials'), before + 5);
  assert.equal(lines.length, cases.length);
  const log = JSON.parse(lines[2] ?? '{}') as Record<string, unknown>;
  assert.equal(log.event, 'auth_refused');
  assert.equal(log.route, 'example.com/api');
  assert.equal(log.reason, 'invalid_credentials');
  assert.doesNotMatch(lines.join(''), /wrong-password-1|wonderland|YWxpY2/);
});

test('basic with hashed passwords: async first, cached after; the cache does not survive a new policy', async () => {
  const hash = await hashPassword('s3cret', 10);
  const policy: AuthorizationConfig = {
    type: 'basic',
    users: [{ username: 'bob', password: null, passwordHash: hash }],
    keys: [],
  };
  const { stage } = harness();
  const first = request(policy, { authorization: basicHeader('bob', 's3cret') });
  const answer = stage(first.proxyRequest);
  assert.ok(answer instanceof Promise, 'a hash check runs off the event loop');
  assert.equal(await answer, PASS);
  assert.equal(first.proxyRequest.subject, 'bob');
  assert.deepEqual(first.proxyRequest.consumedHeaders, ['authorization']);

  const second = request(policy, { authorization: basicHeader('bob', 's3cret') });
  assert.equal(stage(second.proxyRequest), PASS, 'a repeated good credential is a synchronous cache hit');
  assert.equal(second.proxyRequest.subject, 'bob');

  for (const [user, password] of [
    ['bob', 'S3cret'],
    ['nobody', 's3cret'],
  ] as const) {
    const wrong = request(policy, { authorization: basicHeader(user, password) });
    assert.equal(errorCode(answerOf(await stage(wrong.proxyRequest))), 'invalid_credentials', user);
  }

  // A reload builds new policy objects: the old password's cached success must not carry over.
  const reloaded: AuthorizationConfig = {
    type: 'basic',
    users: [{ username: 'bob', password: null, passwordHash: await hashPassword('n3w', 10) }],
    keys: [],
  };
  const old = request(reloaded, { authorization: basicHeader('bob', 's3cret') });
  assert.equal(errorCode(answerOf(await stage(old.proxyRequest))), 'invalid_credentials');
});

test('apikey: named keys, the header consumed, the key name the subject; refusals with a challenge', () => {
  const policy: AuthorizationConfig = {
    type: 'apikey',
    users: [],
    keys: [
      { name: 'ci', key: 'key-for-ci' },
      { name: 'grafana', key: 'key-for-grafana' },
    ],
  };
  const { stage, lines } = harness();
  const good = request(policy, { 'x-api-key': 'key-for-grafana', authorization: 'Bearer upstream-own' });
  assert.equal(stage(good.proxyRequest), PASS);
  assert.equal(good.proxyRequest.subject, 'grafana');
  assert.deepEqual(
    good.proxyRequest.consumedHeaders,
    ['x-api-key'],
    'Authorization is not ours on apikey routes',
  );

  for (const [headers, reason] of [
    [{}, 'missing_credentials'],
    [{ 'x-api-key': '' }, 'missing_credentials'],
    [{ 'x-api-key': 'key-for-ci ' }, 'invalid_credentials'],
    [{ 'x-api-key': 'key-for-ci, key-for-grafana' }, 'invalid_credentials'],
  ] as Array<[IncomingHttpHeaders, string]>) {
    const { proxyRequest } = request(policy, headers);
    const res = answerOf(stage(proxyRequest));
    assert.equal(res.status, 401);
    assert.match(String(res.headers['www-authenticate']), /^ApiKey realm="tollgate"/);
    assert.equal(errorCode(res), reason);
  }
  assert.doesNotMatch(lines.join(''), /key-for-/);
});

test('jwt: Bearer token accepted (async once, then a synchronous cache hit), header consumed', async () => {
  const policy: AuthorizationConfig = { type: 'jwt', users: [], keys: [] };
  const { stage } = harness();
  const { token } = await issueToken(deriveSigningKey(MASTERKEY), {
    owner: 'carol',
    validMinutes: 5,
    now: () => T0,
  });
  const first = request(policy, { authorization: `Bearer ${token}` }, 'a=1');
  const answer = stage(first.proxyRequest);
  assert.ok(answer instanceof Promise);
  assert.equal(await answer, PASS);
  assert.equal(first.proxyRequest.subject, 'carol');
  assert.deepEqual(first.proxyRequest.consumedHeaders, ['authorization']);
  assert.equal(first.proxyRequest.forwardQuery, 'a=1');

  const again = request(policy, { authorization: `bearer ${token}` });
  assert.equal(stage(again.proxyRequest), PASS);
});

test('jwt: token in the query parameter accepted; the parameter removed, the rest of the query kept', async () => {
  const policy: AuthorizationConfig = { type: 'jwt', users: [], keys: [] };
  const { stage } = harness({ tokenParam: 'proxytoken' });
  const { token } = await issueToken(deriveSigningKey(MASTERKEY), {
    owner: 'dave',
    validMinutes: 5,
    now: () => T0,
  });
  const { proxyRequest } = request(
    policy,
    { authorization: 'Basic dXBzdHJlYW06b3du' },
    `x=%2F1&proxytoken=${token}&y`,
  );
  assert.equal(await stage(proxyRequest), PASS);
  assert.equal(proxyRequest.subject, 'dave');
  assert.equal(proxyRequest.forwardQuery, 'x=%2F1&y');
  assert.deepEqual(proxyRequest.consumedHeaders, [], 'a non-Bearer Authorization is not ours to consume');
});

test('jwt refusals: reason codes, RFC 6750 challenges, the token parameter stripped even when refused', async () => {
  const policy: AuthorizationConfig = { type: 'jwt', users: [], keys: [] };
  const h = harness();
  const { token } = await issueToken(deriveSigningKey(MASTERKEY), {
    owner: 'erin',
    validMinutes: 1,
    now: () => T0,
  });
  const missing = request(policy, {}, 'q=1');
  const missingAnswer = answerOf(h.stage(missing.proxyRequest));
  assert.equal(errorCode(missingAnswer), 'missing_credentials');
  assert.equal(missingAnswer.headers['www-authenticate'], 'Bearer realm="tollgate"');

  const bad = request(policy, {}, `tollgatetoken=${token}x&q=1`);
  const badAnswer = answerOf(await h.stage(bad.proxyRequest));
  assert.equal(errorCode(badAnswer), 'token_invalid');
  assert.equal(badAnswer.headers['www-authenticate'], 'Bearer realm="tollgate", error="invalid_token"');
  assert.equal(bad.proxyRequest.forwardQuery, 'q=1', 'the access log must not see the refused token');

  h.setNow(T0 + 3600);
  const expired = answerOf(await h.stage(request(policy, { authorization: `Bearer ${token}` }).proxyRequest));
  assert.equal(errorCode(expired), 'token_expired');
  assert.equal(expired.headers['www-authenticate'], 'Bearer realm="tollgate", error="invalid_token"');
  assert.doesNotMatch(h.lines.join(''), new RegExp(token.slice(-20)));
});

test('jwt: a changed masterkey refuses tokens of the old one, even cached; no masterkey refuses all', async () => {
  const policy: AuthorizationConfig = { type: 'jwt', users: [], keys: [] };
  const h = harness();
  const { token } = await issueToken(deriveSigningKey(MASTERKEY), {
    owner: 'frank',
    validMinutes: 5,
    now: () => T0,
  });
  assert.equal(await h.stage(request(policy, { authorization: `Bearer ${token}` }).proxyRequest), PASS);
  h.setMasterkey('rotated');
  const rotated = request(policy, { authorization: `Bearer ${token}` });
  assert.equal(errorCode(answerOf(await h.stage(rotated.proxyRequest))), 'token_invalid');
  h.setMasterkey(null);
  const none = request(policy, { authorization: `Bearer ${token}` });
  assert.equal(errorCode(answerOf(await h.stage(none.proxyRequest))), 'token_invalid');
});

test('auth_failure_limit: a refusal goes out only once the failure is counted (so the next attempt sees it)', async () => {
  const logger = createLogger('silent', { write: () => {} });
  let counted = 0;
  let finishRecord: () => void = () => {};
  const { stage } = createAuthStage({
    tokenParam: 'tollgatetoken',
    masterkey: () => MASTERKEY,
    logger,
    failureGuard: {
      blockedFor: async () => 0,
      record: () =>
        new Promise<void>((resolve) => {
          finishRecord = () => {
            counted++;
            resolve();
          };
        }),
    },
  });
  const { proxyRequest } = request(plainBasic, { authorization: basicHeader('alice', 'wrong') });
  (proxyRequest.route as { authFailureLimit: number }).authFailureLimit = 3;
  let settled: Verdict | null = null;
  const verdict = stage(proxyRequest);
  assert.ok(verdict instanceof Promise);
  void verdict.then((value) => {
    settled = value;
  });
  // The store has not answered: nothing may be sent yet.
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(settled, null);
  finishRecord();
  const answer = (await verdict) as Answer;
  assert.equal(counted, 1);
  assert.equal(answer.status, 401);
});
