import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { checkKubeconfigFile, FileCheckError } from '../../src/config/file-checks.ts';

/**
 * `validate` checks `kubernetes.kubeconfig` without the client library (config/file-checks): what it
 * refuses, the library refuses too (or finds no cluster in), and what it accepts, the library loads.
 */
const dir = mkdtempSync(join(tmpdir(), 'tollgate-kubeconfig-file-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let count = 0;
function file(text: string): string {
  const path = join(dir, `kubeconfig-${++count}`);
  writeFileSync(path, text);
  return path;
}

const CLUSTER = 'clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]';
const CONTEXT = 'contexts: [{name: x, context: {cluster: c, user: u, namespace: apps}}]';
const USER = 'users: [{name: u, user: {token: sekret}}]';

/** What the library makes of the file: null when it loads and finds a current cluster. */
function libraryRefusal(path: string): string | null {
  try {
    const config = new KubeConfig();
    config.loadFromFile(path);
    return config.getCurrentCluster() === null ? 'no current cluster' : null;
  } catch (error) {
    return (error as Error).message;
  }
}

describe('kubernetes.kubeconfig checks', () => {
  it('accepts what the client library loads', () => {
    const path = file([CLUSTER, CONTEXT, USER, 'current-context: x', ''].join('\n'));
    assert.doesNotThrow(() => checkKubeconfigFile(path));
    assert.equal(libraryRefusal(path), null);
  });

  const broken: Array<[string, string, RegExp]> = [
    [
      'no server',
      `clusters: [{name: c, cluster: {}}]\n${CONTEXT}\ncurrent-context: x\n`,
      /clusters\[0\]\.cluster\.server is missing/,
    ],
    [
      'a nameless cluster',
      `clusters: [{cluster: {server: "https://a"}}]\n`,
      /clusters\[0\]\.name is missing/,
    ],
    [
      'a context without a cluster',
      `${CLUSTER}\ncontexts: [{name: x, context: {user: u}}]\n`,
      /contexts\[0\]\.context\.cluster is missing/,
    ],
    [
      'a nameless user',
      `${CLUSTER}\n${CONTEXT}\nusers: [{user: {token: sekret}}]\ncurrent-context: x\n`,
      /users\[0\]\.name is missing/,
    ],
    ['no current context', `${CLUSTER}\n${CONTEXT}\n`, /the current context names no cluster/],
    [
      'a current context of an unknown cluster',
      `${CLUSTER}\ncontexts: [{name: x, context: {cluster: gone}}]\ncurrent-context: x\n`,
      /the current context names no cluster/,
    ],
  ];
  for (const [name, text, expected] of broken) {
    it(`refuses ${name}, as the library does`, () => {
      const path = file(text);
      assert.throws(
        () => checkKubeconfigFile(path),
        (error: unknown) => {
          assert.ok(error instanceof FileCheckError);
          assert.equal(error.key, 'kubernetes.kubeconfig');
          assert.match(error.message, expected);
          assert.ok(error.message.includes(path), 'the file is named');
          return true;
        },
      );
      assert.notEqual(libraryRefusal(path), null);
    });
  }

  it('says where YAML breaks, never what the file holds', () => {
    const path = file(`${CLUSTER}\nusers:\n- name: u\n  user: {token: sekret-value\n`);
    assert.throws(
      () => checkKubeconfigFile(path),
      (error: Error) => {
        assert.match(error.message, /is not YAML \(line \d+\)$/);
        assert.ok(!error.message.includes('sekret'));
        return true;
      },
    );
    assert.throws(() => checkKubeconfigFile(join(dir, 'missing')), /kubeconfig \S+missing does not exist/);
    assert.throws(() => checkKubeconfigFile(dir), /cannot read kubeconfig \S+: it is a directory/);
  });
});
