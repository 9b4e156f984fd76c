import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MAIN_JS } from '../helpers/tollgate.ts';

/** main.yaml's `tracing:` block as `validate` and `start` read it (docs/configuration.md). */

function tollgate(...args: string[]) {
  const result = spawnSync(process.execPath, [MAIN_JS, ...args], {
    encoding: 'utf8',
    env: { ...process.env, TOLLGATE_CONFIG: '' },
    timeout: 60_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

const UPSTREAMS = 'upstreams:\n  a.test:\n    paths:\n      "/":\n        servers: ["127.0.0.1:1"]\n';

describe('the tracing block of main.yaml', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tollgate-tracing-'));
    await writeFile(join(dir, 'upstreams.yaml'), UPSTREAMS);
  });
  after(() => rm(dir, { recursive: true, force: true }));

  const main = (lines: string[]) => writeFile(join(dir, 'main.yaml'), `${lines.join('\n')}\n`);

  it('accepts a complete block, and one naming only the endpoint', async () => {
    await main([
      'proxy_address_http: "127.0.0.1:0"',
      'tracing:',
      '  endpoint: http://collector.observability:4318',
      '  protocol: http/json',
      '  sample_ratio: 0.25',
      '  service_name: edge',
      '  queue_size: 4096',
      '  batch_delay_seconds: 1',
    ]);
    assert.equal(tollgate('validate', '--config', join(dir, 'main.yaml')).code, 0);
    await main(['tracing:', '  endpoint: https://otel.example.com/prefix']);
    const result = tollgate('validate', '--config', join(dir, 'main.yaml'));
    assert.equal(result.code, 0, result.stderr);
  });

  it('validate names every bad value with file:line, and start refuses the same file', async () => {
    await main([
      'proxy_address_http: "127.0.0.1:0"',
      'tracing:',
      '  endpoint: collector 4318',
      '  protocol: grpc',
      '  sample_ratio: 1.5',
      '  queue_size: 0',
      '  exporter: otlp',
    ]);
    for (const command of ['validate', 'start']) {
      const result = tollgate(command, '--config', join(dir, 'main.yaml'));
      assert.equal(result.code, 1, `${command}: ${result.stderr}`);
      assert.match(
        result.stderr,
        /main\.yaml:3:\d+: tracing\.endpoint: must be an absolute http:\/\/ or https:\/\/ URL/,
      );
      assert.match(
        result.stderr,
        /main\.yaml:4:\d+: tracing\.protocol: unknown protocol 'grpc' \(expected http\/protobuf or http\/json\)/,
      );
      assert.match(result.stderr, /main\.yaml:5:\d+: tracing\.sample_ratio: /);
      assert.match(result.stderr, /main\.yaml:6:\d+: tracing\.queue_size: /);
      assert.match(result.stderr, /main\.yaml:7:\d+: tracing\.exporter: unknown key 'exporter'/);
    }
  });

  it('refuses a block without endpoint, and an endpoint with credentials or a query, never echoing it', async () => {
    await main(['tracing:', '  sample_ratio: 0.5']);
    const missing = tollgate('validate', '--config', join(dir, 'main.yaml'));
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /main\.yaml:1:1: tracing: tracing needs 'endpoint'/);

    await main(['tracing:', '  endpoint: http://user:hunter2@collector:4318']);
    const credentials = tollgate('validate', '--config', join(dir, 'main.yaml'));
    assert.equal(credentials.code, 1);
    assert.match(credentials.stderr, /main\.yaml:2:\d+: tracing\.endpoint: must not carry credentials/);
    assert.doesNotMatch(credentials.stderr, /hunter2/);

    await main(['tracing:', '  endpoint: http://collector:4318/?token=x']);
    const query = tollgate('validate', '--config', join(dir, 'main.yaml'));
    assert.equal(query.code, 1);
    assert.match(query.stderr, /main\.yaml:2:\d+: tracing\.endpoint: must not have a \?query/);
  });
});
