import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';

/** The doc rows a new user reads to set up a login name every method that exists, oidc included. */
const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const rowOf = (text: string, start: string) => text.split('\n').find((line) => line.startsWith(start)) ?? '';
const METHODS = ['basic', 'apikey', 'jwt', 'forward', 'oidc'];

describe('docs name every auth method and the whole callback URL', () => {
  it("configuration.md's authorization.type and observability.md's tollgate.auth.method", () => {
    const typeRow = rowOf(read('docs/configuration.md'), '| `type` |');
    const spanRow = rowOf(read('docs/observability.md'), '| `tollgate.auth.method` |');
    for (const method of METHODS) {
      assert.ok(typeRow.includes(`\`${method}\``), `configuration.md authorization.type lacks ${method}`);
      assert.ok(spanRow.includes(`\`${method}\``), `observability.md tollgate.auth.method lacks ${method}`);
    }
  });

  it("authentication.md's callback URL to register has a scheme and a port", () => {
    const text = read('docs/authentication.md');
    assert.match(text, /Register `\{scheme\}:\/\/\{host\}\[:\{port\}\]\/\.tollgate\/oidc\/callback`/);
    assert.match(text, /`http:\/\/127\.0\.0\.1:8080\/\.tollgate\/oidc\/callback`/);
  });
});
