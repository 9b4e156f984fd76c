import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const SRC = resolve(fileURLToPath(new URL('../../src', import.meta.url)));

/** The folder (or top-level file) a module lives in: `config`, `upstream`, `app.ts`… */
const area = (file: string) => relative(SRC, file).split('/')[0] as string;

/** Every runtime (non-`import type`) import between modules of src/, as [from, to] paths. */
function runtimeImports(): Array<[string, string]> {
  const edges: Array<[string, string]> = [];
  for (const name of readdirSync(SRC, { recursive: true }) as string[]) {
    if (!name.endsWith('.ts')) continue;
    const file = join(SRC, name);
    const source = readFileSync(file, 'utf8');
    for (const match of source.matchAll(/^import\s+(?!type\s)[^;]*?from\s+'(\.[^']+)'/gms)) {
      edges.push([file, resolve(dirname(file), String(match[1]))]);
    }
  }
  return edges;
}

/**
 * The request path reads top to bottom (docs/architecture.md): cli → app → sources → config →
 * routing, and proxy → pipeline → auth/upstream. A lower layer reaching back up at run time is what
 * made features touch seven files; types may be shared freely.
 */
const FORBIDDEN: Record<string, { never: string[]; except?: string[] }> = {
  config: {
    never: [
      'app.ts',
      'cli.ts',
      'sources',
      'pipeline',
      'upstream',
      'proxy',
      'workers',
      'api',
      'admin',
      'observe',
      'routing',
    ],
    // Pure normalisers and policy checks shared so that validation and routing can never disagree.
    except: ['routing/normalise.ts', 'routing/policies.ts'],
  },
  routing: {
    never: [
      'app.ts',
      'cli.ts',
      'sources',
      'pipeline',
      'upstream',
      'proxy',
      'workers',
      'api',
      'admin',
      'auth',
    ],
  },
  upstream: {
    never: ['app.ts', 'cli.ts', 'sources', 'pipeline', 'proxy', 'workers', 'api', 'auth', 'admin'],
  },
  pipeline: { never: ['app.ts', 'cli.ts', 'proxy', 'workers', 'api', 'admin'] },
  auth: { never: ['app.ts', 'cli.ts', 'pipeline', 'upstream', 'proxy', 'workers', 'api', 'admin'] },
  // Metric definitions live in observe/ (observe/metrics.ts); admin/ only serves them.
  observe: { never: ['app.ts', 'cli.ts', 'auth', 'pipeline', 'upstream', 'proxy', 'workers', 'admin'] },
  'log.ts': { never: ['auth', 'pipeline', 'upstream', 'proxy', 'admin'] },
};

test('no module reaches back up the request path at run time', () => {
  const violations: string[] = [];
  for (const [from, to] of runtimeImports()) {
    const rule = FORBIDDEN[area(from)];
    if (!rule || !rule.never.includes(area(to))) continue;
    if (rule.except?.includes(relative(SRC, to))) continue;
    violations.push(`${relative(SRC, from)} → ${relative(SRC, to)}`);
  }
  assert.deepEqual(violations, []);
});

/**
 * The request record (request/) is a leaf every layer names: were it to import anything of theirs,
 * even a type, they would import each other through it (the six-module circle through the record,
 * observe/ and upstream/). Only node's types, routing's types and the error catalogue's codes.
 */
test('the request record imports nothing above it, not even a type', () => {
  const allowed = (target: string) =>
    area(target) === 'request' || ['routing/types.ts', 'errors.ts'].includes(relative(SRC, target));
  const violations: string[] = [];
  for (const name of readdirSync(join(SRC, 'request'))) {
    const file = join(SRC, 'request', name);
    const source = readFileSync(file, 'utf8');
    for (const match of source.matchAll(/^import\s[^;]*?from\s+'([^']+)'/gms)) {
      const specifier = String(match[1]);
      if (specifier.startsWith('node:')) continue;
      const target = specifier.startsWith('.') ? resolve(dirname(file), specifier) : specifier;
      if (!specifier.startsWith('.') || !allowed(target)) violations.push(`request/${name} → ${specifier}`);
    }
  }
  assert.deepEqual(violations, []);
});

/**
 * The Kubernetes client library costs about 0.5 s of CPU and 75 MB to load (docs/architecture.md):
 * the entry points import its provider lazily, only for a config that talks to the API. Checked on
 * the built modules in a fresh process, with a resolve hook that refuses the library.
 */
test('the entry points load without @kubernetes/client-node', () => {
  const dist = resolve(SRC, '../dist');
  const script = `
    import { registerHooks } from 'node:module';
    registerHooks({
      resolve(specifier, context, next) {
        if (specifier.startsWith('@kubernetes/client-node')) throw new Error('loaded ' + specifier);
        return next(specifier, context);
      },
    });
    for (const entry of ['cli.js', 'app.js', 'workers/primary.js', 'workers/worker.js']) {
      await import(${JSON.stringify(`${dist}/`)} + entry);
    }`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
});
