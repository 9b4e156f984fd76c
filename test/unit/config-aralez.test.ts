import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { formatIssue } from '../../src/config/issues.ts';
import { loadConfig, parseUpstreamsConfig } from '../../src/config/load.ts';
import { MAIN_KEYS } from '../../src/config/validate-main.ts';
import { problems, valid } from '../fixtures/config/problems.ts';

/**
 * People arrive with configs written for Aralez. Fed its documented example files as they are, every
 * message must say what to do: the line, the YAML path, and either a guess that is then accepted, the
 * known keys, or where the setting lives in Tollgate.
 */

const DIR = join(import.meta.dirname, '../fixtures/config/aralez');
const MAIN = relative(process.cwd(), join(DIR, 'main.yaml'));
const UPSTREAMS = relative(process.cwd(), join(DIR, 'upstreams.yaml'));
const HEALTH =
  'active health checks are set per path in upstreams.yaml: paths.<prefix>.health_check {path, interval_seconds}';

describe("Aralez's example files", () => {
  it('main.yaml: every unknown key is explained, and the missing upstreams_conf names the resolved path', async () => {
    assert.deepEqual(problems(await loadConfig(MAIN)), [
      `${MAIN}:3:1: threads: unknown key 'threads' (known keys: ${MAIN_KEYS.toSorted().join(', ')})`,
      `${MAIN}:4:1: daemon: unknown key 'daemon' (the known keys are listed on line 3)`,
      `${MAIN}:5:1: upstream_keepalive_pool_size: unknown key 'upstream_keepalive_pool_size' (the known keys are listed on line 3)`,
      `${MAIN}:6:1: pid_file: unknown key 'pid_file' (the known keys are listed on line 3)`,
      `${MAIN}:9:17: upstreams_conf: cannot read 'etc/upstreams.yaml': no such file (a relative path is resolved against main.yaml's directory, giving ${join(DIR, 'etc/upstreams.yaml')})`,
      `${MAIN}:11:1: hc_method: unknown key 'hc_method' (${HEALTH})`,
      `${MAIN}:12:1: hc_interval: unknown key 'hc_interval' (${HEALTH})`,
      `${MAIN}:14:1: sticky_sessions: unknown key 'sticky_sessions' (it belongs in upstreams.yaml, the file named by upstreams_conf)`,
    ]);
  });

  it('upstreams.yaml: unknown keys list the known ones, jwt data and healthcheck are explained', async () => {
    const text = await readFile(UPSTREAMS, 'utf8');
    const known =
      'auth_failure_limit, authorization, client_headers, masterkey, max_body_bytes, provider, rate_limit, ' +
      'request_headers, response_headers, server_headers, sticky_sessions, to_https, upstreams';
    assert.deepEqual(problems(parseUpstreamsConfig(text, UPSTREAMS)), [
      `${UPSTREAMS}:6:1: x4xx_limit: unknown key 'x4xx_limit' (known keys: ${known})`,
      `${UPSTREAMS}:22:11: upstreams.myhost.mydomain.com.paths./foo.authorization.data: jwt takes no creds: tokens are verified with the masterkey`,
      `${UPSTREAMS}:26:9: upstreams.myhost.mydomain.com.paths./.well-known/acme-challenge.healthcheck: unknown key 'healthcheck' (did you mean 'health_check'?)`,
    ]);
  });

  it("following a 'did you mean' hint gives a key that accepts the value as written", async () => {
    const text = await readFile(UPSTREAMS, 'utf8');
    const before = parseUpstreamsConfig(text, UPSTREAMS);
    const guesses = (before.ok ? [] : before.issues).flatMap((issue) => {
      const guess = /unknown key '([^']+)' \(did you mean '([^']+)'\?\)/.exec(issue.message);
      return guess ? [{ issue, unknown: guess[1] as string, known: guess[2] as string }] : [];
    });
    assert.ok(guesses.length > 0);
    for (const { issue, unknown, known } of guesses) {
      const lines = text.split('\n');
      lines[issue.line - 1] = (lines[issue.line - 1] as string).replace(`${unknown}:`, `${known}:`);
      const after = parseUpstreamsConfig(lines.join('\n'), UPSTREAMS);
      const sameLine = (after.ok ? [] : after.issues).filter((problem) => problem.line === issue.line);
      assert.deepEqual(sameLine.map(formatIssue), [], `renaming '${unknown}' to '${known}'`);
    }
  });

  it('health_check: false means no active checks; true is refused with the shape it needs', () => {
    const routes = (healthCheck: string) =>
      `upstreams:\n  a:\n    paths:\n      /:\n        servers: ["a:1"]\n        health_check: ${healthCheck}\n`;
    const off = valid(parseUpstreamsConfig(routes('false'), 'upstreams.yaml'));
    assert.equal(off.hosts[0]?.paths[0]?.healthCheck, null);
    assert.deepEqual(problems(parseUpstreamsConfig(routes('true'), 'upstreams.yaml')), [
      'upstreams.yaml:6:23: upstreams.a.paths./.health_check: true is not enough: give the path to probe, e.g. { path: /healthz, interval_seconds: 10 } (false or no key: no active checks)',
    ]);
    assert.deepEqual(problems(parseUpstreamsConfig(routes('"/healthz"'), 'upstreams.yaml')), [
      'upstreams.yaml:6:23: upstreams.a.paths./.health_check: expected { path, interval_seconds } or false, got a string',
    ]);
    const on = valid(parseUpstreamsConfig(routes('{ path: /healthz }'), 'upstreams.yaml'));
    assert.deepEqual(on.hosts[0]?.paths[0]?.healthCheck, { path: '/healthz', intervalSeconds: 10 });
  });
});
