import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { hostWithin } from '../../src/sources/kubernetes/gateway/hostnames.ts';
import { holdsClaim, isolatedHosts, resolveGateway } from '../../src/sources/kubernetes/gateway/listeners.ts';
import type { Gateway } from '../../src/sources/kubernetes/gateway/objects.ts';

/** Listener isolation (docs/gateway-api.md#routes): the hosts a route keeps through each listener. */
describe('gateway listener isolation', () => {
  const gateway = (listeners: Array<Record<string, unknown>>) =>
    resolveGateway(
      {
        metadata: { name: 'gw', namespace: 'infra', generation: 1 },
        spec: { gatewayClassName: 'tollgate', listeners },
      } as unknown as Gateway,
      new Map(),
      [],
    );
  const http = (name: string, hostname?: string, protocol = 'HTTP') => ({
    name,
    port: 80,
    protocol,
    ...(hostname === undefined ? {} : { hostname }),
  });
  const ALL = ['bar.com', '*.example.com', '*.foo.example.com', 'abc.foo.example.com'];

  it('leaves out the hosts a more specific sibling listener covers', () => {
    const resolved = gateway([
      http('empty-hostname'),
      http('wildcard-example-com', '*.example.com'),
      http('wildcard-foo-example-com', '*.foo.example.com'),
      http('abc-foo-example-com', 'abc.foo.example.com'),
    ]);
    const [empty, wildcard, foo, abc] = resolved.listeners as [
      (typeof resolved.listeners)[0],
      (typeof resolved.listeners)[0],
      (typeof resolved.listeners)[0],
      (typeof resolved.listeners)[0],
    ];
    assert.deepEqual(isolatedHosts(ALL, empty, resolved.listeners), ['bar.com']);
    assert.deepEqual(
      isolatedHosts(
        ['*.example.com', '*.foo.example.com', 'abc.foo.example.com'],
        wildcard,
        resolved.listeners,
      ),
      ['*.example.com'],
    );
    assert.deepEqual(isolatedHosts(['*.foo.example.com', 'abc.foo.example.com'], foo, resolved.listeners), [
      '*.foo.example.com',
    ]);
    assert.deepEqual(isolatedHosts(['abc.foo.example.com'], abc, resolved.listeners), [
      'abc.foo.example.com',
    ]);
    // A route without hostnames through the hostname-less listener: every host nothing else serves.
    assert.deepEqual(isolatedHosts(['DEFAULT'], empty, resolved.listeners), ['DEFAULT']);
  });

  it('isolates only from listeners on the same port that hold their hostname', () => {
    const resolved = gateway([
      http('any'),
      http('tls-foo', 'a.foo.example.com', 'HTTPS'),
      http('bad', 'x.*.example.com'),
    ]);
    const any = resolved.listeners[0] as (typeof resolved.listeners)[0];
    // The HTTPS listener is served on the TLS port; the bad hostname is refused for its shape.
    assert.equal(holdsClaim(resolved.listeners[2] as (typeof resolved.listeners)[0]), false);
    assert.deepEqual(isolatedHosts(['a.foo.example.com', 'x.a.example.com'], any, resolved.listeners), [
      'a.foo.example.com',
      'x.a.example.com',
    ]);
  });

  it('hostWithin: names and wildcards inside a wildcard, null is every host', () => {
    assert.equal(hostWithin('a.example.com', null), true);
    assert.equal(hostWithin('a.example.com', '*.example.com'), true);
    assert.equal(hostWithin('*.foo.example.com', '*.example.com'), true);
    assert.equal(hostWithin('example.com', '*.example.com'), false);
    assert.equal(hostWithin('*.example.com', '*.foo.example.com'), false);
    assert.equal(hostWithin('a.example.com', 'a.example.com'), true);
  });
});
