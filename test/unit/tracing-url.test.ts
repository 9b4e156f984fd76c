import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tracesUrl } from '../../src/observe/tracing-sdk.ts';

test('spans go to <endpoint>/v1/traces, keeping a path prefix, and an endpoint naming that path is used as it is', () => {
  assert.equal(tracesUrl('http://collector:4318'), 'http://collector:4318/v1/traces');
  assert.equal(tracesUrl('http://collector:4318/'), 'http://collector:4318/v1/traces');
  assert.equal(tracesUrl('https://otel.example.com/prefix/'), 'https://otel.example.com/prefix/v1/traces');
  assert.equal(tracesUrl('http://collector:4318/v1/traces'), 'http://collector:4318/v1/traces');
});
