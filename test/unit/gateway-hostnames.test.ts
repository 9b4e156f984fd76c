import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { hostnameKey, intersectHostnames } from '../../src/sources/kubernetes/gateway/hostnames.ts';

/** Route ∩ listener hostnames as the Gateway API defines them (docs/gateway-api.md#routes). */
describe('gateway hostnames', () => {
  it('intersects names and wildcards, keeping the more specific side', () => {
    assert.deepEqual(intersectHostnames([], null), ['DEFAULT']);
    assert.deepEqual(intersectHostnames([], '*.example.com'), ['*.example.com']);
    assert.deepEqual(intersectHostnames(['a.example.com'], null), ['a.example.com']);
    assert.deepEqual(intersectHostnames(['a.example.com', 'other.org'], '*.example.com'), ['a.example.com']);
    assert.deepEqual(intersectHostnames(['a.b.example.com'], '*.example.com'), ['a.b.example.com']);
    assert.deepEqual(intersectHostnames(['example.com'], '*.example.com'), []);
    assert.deepEqual(intersectHostnames(['*.example.com'], 'a.example.com'), ['a.example.com']);
    assert.deepEqual(intersectHostnames(['*.b.example.com'], '*.example.com'), ['*.b.example.com']);
    assert.deepEqual(intersectHostnames(['*.example.com'], '*.b.example.com'), ['*.b.example.com']);
    assert.deepEqual(intersectHostnames(['*.example.com'], '*.example.org'), []);
  });

  it('reads hostnames into host keys, refusing IPs and misplaced wildcards', () => {
    assert.deepEqual(hostnameKey('Foo.Example.COM.'), { ok: true, value: 'foo.example.com' });
    assert.deepEqual(hostnameKey('*.Example.com'), { ok: true, value: '*.example.com' });
    assert.equal(hostnameKey('a.*.example.com').ok, false);
    assert.equal(hostnameKey('10.0.0.1').ok, false);
    assert.equal(hostnameKey('*.').ok, false);
  });
});
