import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { V1EndpointSlice } from '@kubernetes/client-node';
import { parseServiceRef, resolveServiceRef, serviceRefKey } from '../../src/config/service-ref.ts';
import { readyServers } from '../../src/sources/kubernetes/endpoints.ts';
import { backoffDelay, classifyError } from '../../src/sources/kubernetes/resource-watch.ts';
import { endpointSlice } from '../helpers/fake-kube-api.ts';

/** Slices as the client hands them over: plain JSON of schema-checked objects. */
function slices(...specs: Parameters<typeof endpointSlice>[0][]): V1EndpointSlice[] {
  return specs.map((spec) => {
    const model = endpointSlice(spec);
    model.validate();
    return model.toJSON() as unknown as V1EndpointSlice;
  });
}

test('service references: name, optional namespace, port by number or name', () => {
  assert.deepEqual(parseServiceRef('web:8080'), {
    ok: true,
    ref: { name: 'web', namespace: null, port: 8080 },
  });
  assert.deepEqual(parseServiceRef('web.other-ns:http'), {
    ok: true,
    ref: { name: 'web', namespace: 'other-ns', port: 'http' },
  });
  const ref = parseServiceRef('api-v2:grpc-web');
  assert.ok(ref.ok);
  assert.equal(serviceRefKey(resolveServiceRef(ref.ref, 'apps')), 'api-v2.apps:grpc-web');
});

test('service references: each malformed part is named', () => {
  const cases: Array<[string, RegExp]> = [
    ['web', /has no port/],
    ['Web:80', /not a Service name/],
    ['1web:80', /not a Service name/],
    ['web.a.b:80', /not a namespace name/],
    ['web.:80', /not a namespace name/],
    ['web:0', /out of range/],
    ['web:65536', /out of range/],
    ['web:', /neither a port number nor a port name/],
    ['web:-http', /neither a port number nor a port name/],
    ['web:http--x', /neither a port number nor a port name/],
    ['web:averyveryverylongportname', /neither a port number nor a port name/],
  ];
  for (const [value, message] of cases) {
    const parsed = parseServiceRef(value);
    assert.equal(parsed.ok, false, value);
    if (!parsed.ok) assert.match(parsed.message, message, value);
  }
});

test('ready servers: only ready endpoints; serving-but-terminating and not-ready ones are left out', () => {
  const servers = readyServers(
    slices({
      service: 'web',
      ports: [{ name: 'http', port: 8080 }],
      endpoints: [
        { ip: '10.0.0.3' },
        { ip: '10.0.0.1' },
        { ip: '10.0.0.2', ready: false, serving: true, terminating: true },
        { ip: '10.0.0.4', ready: false, serving: false },
      ],
    }),
    'http',
  );
  assert.deepEqual(
    servers.map((s) => s.raw),
    ['10.0.0.1:8080', '10.0.0.3:8080'],
  );
  assert.deepEqual(servers[0], { raw: '10.0.0.1:8080', host: '10.0.0.1', port: 8080 });
});

test('ready servers: an absent ready condition counts as ready, as the API documents', () => {
  const [slice] = slices({ service: 'web', ports: [{ port: 80 }], endpoints: [{ ip: '10.0.0.9' }] });
  const endpoint = slice?.endpoints?.[0];
  assert.ok(slice && endpoint);
  endpoint.conditions = {};
  assert.deepEqual(
    readyServers([slice], 80).map((s) => s.raw),
    ['10.0.0.9:80'],
  );
});

test('ready servers: port by name picks the named slice port; by number the target port', () => {
  const twoPorts = slices({
    service: 'web',
    ports: [
      { name: 'http', port: 8080 },
      { name: 'metrics', port: 9100 },
    ],
    endpoints: [{ ip: '10.0.0.1' }],
  });
  assert.deepEqual(
    readyServers(twoPorts, 'metrics').map((s) => s.raw),
    ['10.0.0.1:9100'],
  );
  assert.deepEqual(
    readyServers(twoPorts, 8080).map((s) => s.raw),
    ['10.0.0.1:8080'],
  );
  assert.deepEqual(readyServers(twoPorts, 'grpc'), []);
  assert.deepEqual(readyServers(twoPorts, 80), []);
});

test('ready servers: slices are joined, duplicates dropped, IPv6 bracketed, order stable', () => {
  const joined = slices(
    {
      service: 'web',
      name: 'web-1',
      ports: [{ name: 'http', port: 8080 }],
      endpoints: [{ ip: '10.0.0.2' }, { ip: '10.0.0.1' }],
    },
    { service: 'web', name: 'web-2', ports: [{ name: 'http', port: 8080 }], endpoints: [{ ip: '10.0.0.1' }] },
    {
      service: 'web',
      name: 'web-3',
      addressType: 'IPv6',
      ports: [{ name: 'http', port: 8080 }],
      endpoints: [{ ip: 'fd00::1' }],
    },
  );
  const forward = readyServers(joined, 'http').map((s) => s.raw);
  assert.deepEqual(forward, ['10.0.0.1:8080', '10.0.0.2:8080', '[fd00::1]:8080']);
  assert.deepEqual(
    readyServers([...joined].reverse(), 'http').map((s) => s.raw),
    forward,
  );
  assert.equal(readyServers(joined, 'http')[2]?.host, 'fd00::1');
});

test('backoff: doubles from the initial delay, capped, jittered into the upper half', () => {
  const tuning = { initialBackoffMs: 500, maxBackoffMs: 30_000 };
  assert.equal(backoffDelay(1, { ...tuning, random: () => 0 }), 250);
  assert.equal(backoffDelay(1, { ...tuning, random: () => 1 }), 500);
  assert.equal(backoffDelay(3, { ...tuning, random: () => 1 }), 2000);
  assert.equal(backoffDelay(20, { ...tuning, random: () => 1 }), 30_000);
  assert.equal(backoffDelay(20, { ...tuning, random: () => 0 }), 15_000);
});

test('errors are classified into the restart reasons the metric exposes', () => {
  assert.equal(classifyError({ code: 403 }), 'forbidden');
  assert.equal(classifyError({ statusCode: 401 }), 'unauthorized');
  assert.equal(classifyError({ statusCode: 410 }), 'gone');
  assert.equal(classifyError({ code: 500 }), 'server_error');
  assert.equal(classifyError(new DOMException('late', 'TimeoutError')), 'timeout');
  assert.equal(
    classifyError(Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } })),
    'unreachable',
  );
});
