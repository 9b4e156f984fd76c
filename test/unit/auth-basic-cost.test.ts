import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { describe, it } from 'node:test';
import { createBasicAuthenticator } from '../../src/auth/basic.ts';
import {
  CheckGate,
  costOf,
  FairCheckGate,
  hashPassword,
  MAX_WAITING_CHECKS_PER_CLIENT,
  PasswordChecksOverloaded,
  type PasswordHash,
  type StoredHash,
  verifyPassword,
} from '../../src/auth/password.ts';
import type { AuthorizationConfig } from '../../src/config/types.ts';
import type { ProxyRequest } from '../../src/request/record.ts';

function request(headers: IncomingHttpHeaders, clientIp = '10.0.0.1'): ProxyRequest {
  return { req: { headers }, subject: null, consumedHeaders: [], clientIp } as unknown as ProxyRequest;
}
const basic = (user: string, password: string, clientIp?: string) =>
  request({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` }, clientIp);

/** A promise and the function that settles it, for holding a task open until the test says so. */
function deferred() {
  let release = () => {};
  const promise = new Promise<void>((resolve) => {
    release = resolve;
  });
  return { promise, release };
}

describe('CheckGate: bounded concurrency and a bounded queue', () => {
  it('runs at most `concurrency` tasks, queues the rest in order and refuses past the queue', async () => {
    const gate = new CheckGate(2, 2);
    const holds = [deferred(), deferred(), deferred(), deferred()];
    const started: number[] = [];
    const runs = holds.map((hold, i) =>
      gate.run(async () => {
        started.push(i);
        await hold.promise;
        return i;
      }),
    );
    await Promise.resolve();
    assert.deepEqual(started, [0, 1]);
    assert.equal(gate.active, 2);
    assert.equal(gate.waiting, 2);
    await assert.rejects(
      gate.run(async () => 'too many'),
      PasswordChecksOverloaded,
    );
    holds[1]?.release();
    assert.equal(await runs[1], 1);
    assert.deepEqual(started, [0, 1, 2]);
    for (const hold of holds) hold.release();
    assert.deepEqual(await Promise.all(runs), [0, 1, 2, 3]);
    assert.equal(gate.active, 0);
    assert.equal(gate.waiting, 0);
  });

  it('frees the slot when a task fails', async () => {
    const gate = new CheckGate(1, 0);
    await assert.rejects(
      gate.run(async () => {
        throw new Error('boom');
      }),
      /boom/,
    );
    assert.equal(await gate.run(async () => 'next'), 'next');
  });
});

describe('basic auth costs the same whoever asks', () => {
  it('runs one scrypt per distinct cost of the policy for every kind of user and answer', async () => {
    const [cheap, dear] = await Promise.all([hashPassword('cheap-pw', 10), hashPassword('dear-pw', 11)]);
    const policy: AuthorizationConfig = {
      type: 'basic',
      users: [
        { username: 'plain', password: 'plain-pw', passwordHash: null },
        { username: 'cheap', password: null, passwordHash: cheap },
        { username: 'dear', password: null, passwordHash: dear },
      ],
      keys: [],
    };
    const work: string[][] = [];
    let current: string[] = [];
    const verify = (password: string, hash: string | StoredHash) => {
      current.push(costOf(hash as PasswordHash));
      return verifyPassword(password, hash);
    };
    const authenticate = createBasicAuthenticator(policy, { verify });
    const attempts: Array<[string, string, string | null]> = [
      ['plain', 'plain-pw', 'plain'],
      ['plain', 'wrong', null],
      ['cheap', 'cheap-pw', 'cheap'],
      ['cheap', 'wrong', null],
      ['dear', 'dear-pw', 'dear'],
      ['dear', 'wrong', null],
      ['nobody', 'plain-pw', null],
    ];
    for (const [user, password, subject] of attempts) {
      current = [];
      const req = basic(user, password);
      const reason = await authenticate(req);
      assert.equal(req.subject, subject, `${user}:${password}`);
      assert.equal(reason, subject === null ? 'invalid_credentials' : null, `${user}:${password}`);
      work.push(current);
    }
    const expected = ['10,8,1,32', '11,8,1,32'];
    for (const [i, costs] of work.entries()) {
      assert.deepEqual([...costs].sort(), expected, `attempt ${attempts[i]?.slice(0, 2).join(':')}`);
    }
  });

  it('a policy of plain passwords only never hashes', async () => {
    let hashed = 0;
    const authenticate = createBasicAuthenticator(
      { type: 'basic', users: [{ username: 'a', password: 'pw', passwordHash: null }], keys: [] },
      {
        verify: async () => {
          hashed++;
          return false;
        },
      },
    );
    assert.equal(authenticate(basic('a', 'pw')), null);
    assert.equal(authenticate(basic('b', 'pw')), 'invalid_credentials');
    assert.equal(hashed, 0);
  });

  it("refuses with auth_overloaded past one client's queue, while other clients and policies still check", async () => {
    const hash = await hashPassword('pw', 10);
    const policy: AuthorizationConfig = {
      type: 'basic',
      users: [{ username: 'u', password: null, passwordHash: hash }],
      keys: [],
    };
    const hold = deferred();
    const verified: string[] = [];
    const flooded = createBasicAuthenticator(policy, {
      verify: async (password, stored) => {
        verified.push(password);
        if (password.startsWith('guess')) await hold.promise;
        return verifyPassword(password, stored);
      },
    });
    const other = createBasicAuthenticator(policy);
    // One running plus the flooder's full queue, each with a different password so no answer is cached.
    const pending = Array.from({ length: MAX_WAITING_CHECKS_PER_CLIENT + 1 }, (_, i) =>
      flooded(basic('u', `guess-${i}`, '10.6.6.6')),
    );
    assert.equal(await flooded(basic('u', 'one-too-many', '10.6.6.6')), 'auth_overloaded');
    // Another client of the flooded policy still gets a place, served before the flood's queue.
    const fair = basic('u', 'pw', '10.0.0.2');
    const fairCheck = flooded(fair);
    const req = basic('u', 'pw');
    assert.equal(await other(req), null);
    assert.equal(req.subject, 'u');
    hold.release();
    assert.equal(await fairCheck, null);
    assert.equal(fair.subject, 'u');
    for (const reason of await Promise.all(pending)) assert.equal(reason, 'invalid_credentials');
    // The other client waited for the running check and one turn of the flooder, not for its queue.
    assert.deepEqual(verified.slice(0, 3), ['guess-0', 'guess-1', 'pw']);
  });

  it('a client that keeps failing is checked beside the others, never ahead of them', async () => {
    const hash = await hashPassword('pw', 10);
    const hold = deferred();
    let holding = false;
    const authenticate = createBasicAuthenticator(
      { type: 'basic', users: [{ username: 'u', password: null, passwordHash: hash }], keys: [] },
      {
        verify: async (password, stored) => {
          if (holding && password.startsWith('guess')) await hold.promise;
          return verifyPassword(password, stored);
        },
      },
    );
    // Three failures make 10.6.6.6 a suspect for a minute.
    for (let i = 0; i < 3; i++)
      assert.equal(await authenticate(basic('u', `wrong-${i}`, '10.6.6.6')), 'invalid_credentials');
    holding = true;
    const flood = Array.from({ length: 4 }, (_, i) => authenticate(basic('u', `guess-${i}`, '10.6.6.6')));
    // The flood's check is running and its queue is full; another client's login does not wait for it.
    const fair = basic('u', 'pw', '10.0.0.2');
    assert.equal(await authenticate(fair), null);
    assert.equal(fair.subject, 'u');
    hold.release();
    for (const reason of await Promise.all(flood)) assert.equal(reason, 'invalid_credentials');
  });

  it('one credential arriving many times at once is hashed once', async () => {
    const hash = await hashPassword('pw', 10);
    let hashed = 0;
    const authenticate = createBasicAuthenticator(
      { type: 'basic', users: [{ username: 'u', password: null, passwordHash: hash }], keys: [] },
      {
        verify: async (password, stored) => {
          hashed++;
          return verifyPassword(password, stored);
        },
      },
    );
    const requests = Array.from({ length: 40 }, (_, i) => basic('u', 'pw', `10.0.0.${i}`));
    const reasons = await Promise.all(requests.map((req) => authenticate(req)));
    assert.deepEqual(new Set(reasons), new Set([null]));
    assert.equal(hashed, 1);
  });
});

describe('FairCheckGate: one at a time, round robin over clients', () => {
  it('serves waiting clients in turn, not in arrival order', async () => {
    const gate = new FairCheckGate({ maxPerClient: 10, maxWaiting: 100 });
    const hold = deferred();
    const order: string[] = [];
    const running = gate.run('first', async () => {
      await hold.promise;
      order.push('first');
    });
    const queued = [
      ...['a1', 'a2', 'a3'].map((name) => gate.run('a', async () => void order.push(name))),
      gate.run('b', async () => void order.push('b1')),
    ];
    assert.equal(gate.waiting, 4);
    hold.release();
    await Promise.all([running, ...queued]);
    assert.deepEqual(order, ['first', 'a1', 'b1', 'a2', 'a3']);
  });

  it('a full client queue refuses that client only', async () => {
    const gate = new FairCheckGate({ maxPerClient: 1, maxWaiting: 100 });
    const hold = deferred();
    const running = gate.run('x', () => hold.promise);
    const queued = gate.run('x', async () => {});
    await assert.rejects(
      gate.run('x', async () => {}),
      PasswordChecksOverloaded,
    );
    const other = gate.run('y', async () => 'y');
    hold.release();
    assert.equal(await other, 'y');
    await Promise.all([running, queued]);
  });
});
