import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderStatusPage } from '../../src/admin/status-page.ts';
import { discoveryProblem } from '../../src/auth/oidc/provider-health.ts';
import type { AuthorizationConfig } from '../../src/config/types.ts';
import { buildStatus, type MetricsSnapshot } from '../../src/observe/status.ts';
import { fakeRoute, fakeServer, fakeTable } from '../helpers/fake-routes.ts';

/** Provider health on /status (docs/observability.md#the-status-page), from the metrics alone. */

const gauge = (name: string, values: Array<[Record<string, string>, number]>) =>
  ({
    name,
    help: '',
    type: 'gauge',
    aggregator: 'min',
    values: values.map(([labels, value]) => ({ labels, value })),
  }) as unknown as MetricsSnapshot[number];

const oidc = (provider: string) =>
  ({ type: 'oidc', users: [], keys: [], oidc: { provider } }) as unknown as AuthorizationConfig;

describe('OpenID providers on /status', () => {
  const server = fakeServer('10.0.0.1:80');
  const model = buildStatus({
    now: Date.parse('2026-01-10T00:00:00Z'),
    phase: 'ready',
    table: fakeTable([
      fakeRoute({ id: 'a.test/', servers: [server], auth: oidc('corp') }),
      fakeRoute({ id: 'b.test/', servers: [server], auth: oidc('gone') }),
      fakeRoute({ id: 'c.test/', servers: [server], auth: oidc('shaky') }),
    ]),
    metrics: [
      gauge('tollgate_oidc_provider_up', [
        [{ provider: 'corp' }, 1],
        [{ provider: 'gone' }, 0],
        [{ provider: 'shaky' }, 1],
      ]),
      gauge('tollgate_oidc_provider_problem', [
        [{ provider: 'gone', problem: 'tls' }, 1],
        [{ provider: 'shaky', problem: 'timeout' }, 1],
      ]),
    ],
    reloads: [],
    workers: null,
  });

  it('a provider without metadata is down, its routes too, with the reason; a failing rediscovery only warns', () => {
    assert.deepEqual(
      model.providers.map(({ name, state }) => [name, state]),
      [
        ['corp', 'ok'],
        ['gone', 'down'],
        ['shaky', 'failing'],
      ],
    );
    const route = (id: string) => model.routes.find((candidate) => candidate.id === id);
    assert.equal(route('b.test/')?.state, 'down');
    assert.match(String(route('b.test/')?.problems), /OpenID provider gone unavailable: .*ca_file/);
    assert.equal(route('a.test/')?.state, 'ok');
    assert.equal(route('c.test/')?.state, 'ok', 'earlier metadata still serves');
    assert.equal(model.totals.routes_down, 1);
    const page = renderStatusPage(model);
    assert.match(page, /<h2>Login providers<\/h2>/);
    assert.match(page, /<td>shaky<\/td><td class="warning">discovery failing/);
  });

  it('names the problem of a failed discovery', () => {
    const fetchFailed = (code: string) => Object.assign(new TypeError('fetch failed'), { cause: { code } });
    assert.equal(discoveryProblem(fetchFailed('ECONNREFUSED')), 'unreachable');
    assert.equal(discoveryProblem(fetchFailed('ENOTFOUND')), 'unreachable');
    assert.equal(discoveryProblem(fetchFailed('UNABLE_TO_VERIFY_LEAF_SIGNATURE')), 'tls');
    assert.equal(discoveryProblem(fetchFailed('DEPTH_ZERO_SELF_SIGNED_CERT')), 'tls');
    assert.equal(discoveryProblem(fetchFailed('UND_ERR_CONNECT_TIMEOUT')), 'timeout');
    assert.equal(discoveryProblem(Object.assign(new Error('x'), { name: 'TimeoutError' })), 'timeout');
    const notConform = (message: string) =>
      Object.assign(new Error(message), { code: 'OAUTH_RESPONSE_IS_NOT_CONFORM' });
    assert.equal(discoveryProblem(notConform('unexpected HTTP status code')), 'http_error');
    assert.equal(discoveryProblem(notConform('"response" body must be a top level object')), 'bad_metadata');
    assert.equal(discoveryProblem(new Error('the metadata has no authorization_endpoint')), 'bad_metadata');
  });

  it('a forward route whose last check failed is down with the reason, never the URL', () => {
    const forward = {
      type: 'forward',
      users: [],
      keys: [],
      forward: { url: 'http://auth.internal/check?key=secret' },
    } as unknown as AuthorizationConfig;
    const shown = buildStatus({
      now: 0,
      phase: 'ready',
      table: fakeTable([
        fakeRoute({ id: 'f.test/', servers: [server], auth: forward }),
        fakeRoute({ id: 'g.test/', servers: [server], auth: forward }),
      ]),
      metrics: [
        gauge('tollgate_forward_auth_failing', [
          [{ route: 'f.test/', failure: 'timeout' }, 1],
          [{ route: 'g.test/', failure: 'unreachable' }, 0],
        ]),
      ],
      reloads: [],
      workers: null,
    });
    assert.equal(shown.routes[0]?.id, 'f.test/');
    assert.equal(shown.routes[0]?.state, 'down');
    assert.deepEqual(shown.routes[0]?.problems, ['forward-auth service did not answer in time (last check)']);
    assert.equal(shown.routes[1]?.state, 'ok');
    assert.doesNotMatch(JSON.stringify(shown), /secret|auth\.internal/);
  });
});
