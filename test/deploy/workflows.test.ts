/**
 * The GitHub workflows cannot run here. They are checked with GitHub's own workflow parser
 * (@actions/workflow-parser: schema, expressions) and for the shape this project relies on.
 */
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { registerHooks } from 'node:module';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { parse } from 'yaml';
import { ROOT } from '../helpers/tollgate.ts';
import { type Manifest, splitManifests } from './manifests.ts';

const WORKFLOWS = join(ROOT, '.github', 'workflows');

// The parser imports its JSON schema without an import attribute (written for bundlers); Node
// requires one, so it is added for that package's JSON files only.
registerHooks({
  load(url, context, nextLoad) {
    if (url.includes('/@actions/workflow-parser/') && url.endsWith('.json')) {
      return nextLoad(url, { ...context, importAttributes: { ...context.importAttributes, type: 'json' } });
    }
    return nextLoad(url, context);
  },
});
const parser = await import('@actions/workflow-parser');

interface Workflow {
  file: string;
  text: string;
  doc: Manifest;
}

let workflows: Workflow[];
const workflow = (file: string) => {
  const found = workflows.find((w) => w.file === file);
  assert.ok(found, `.github/workflows/${file} missing`);
  return found;
};
const steps = (w: Workflow, job: string): Manifest[] => {
  const j = w.doc.jobs?.[job];
  assert.ok(j, `${w.file}: job ${job} missing`);
  return j.steps as Manifest[];
};
const runs = (w: Workflow, job: string) =>
  steps(w, job)
    .map((s) => (s.run as string | undefined) ?? '')
    .join('\n');
const uses = (w: Workflow, job: string) => steps(w, job).map((s) => (s.uses as string | undefined) ?? '');

before(async () => {
  const files = (await readdir(WORKFLOWS)).filter((f) => /\.ya?ml$/.test(f)).sort();
  workflows = await Promise.all(
    files.map(async (file) => {
      const text = await readFile(join(WORKFLOWS, file), 'utf8');
      return { file, text, doc: parse(text) as Manifest };
    }),
  );
});

describe('GitHub workflows', () => {
  test('each file passes GitHub’s workflow parser without errors', async () => {
    assert.ok(workflows.length >= 3);
    for (const { file, text } of workflows) {
      const result = parser.parseWorkflow({ name: file, content: text }, new parser.NoOperationTraceWriter());
      const errors = result.context.errors.getErrors().map((e) => e.message);
      assert.deepEqual(errors, [], file);
      assert.ok(result.value, `${file}: nothing parsed`);
      const template = await parser.convertWorkflowTemplate(result.context, result.value);
      assert.deepEqual(template.errors ?? [], [], `${file}: conversion errors`);
    }
  });

  test('the parser does reject a broken workflow (the check above can fail)', () => {
    const broken = 'on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    stepz:\n      - run: echo\n';
    const result = parser.parseWorkflow(
      { name: 'broken.yml', content: broken },
      new parser.NoOperationTraceWriter(),
    );
    assert.match(result.context.errors.getErrors()[0]?.message ?? '', /stepz/);
  });

  test('every action is pinned to a version and every job is bounded in time', () => {
    for (const w of workflows) {
      for (const [name, job] of Object.entries(w.doc.jobs as Record<string, Manifest>)) {
        assert.ok(job['timeout-minutes'] > 0, `${w.file}: job ${name} has no timeout-minutes`);
        for (const step of job.steps as Manifest[]) {
          if (step.uses) assert.match(step.uses, /^[\w.-]+\/[\w./-]+@v\d+/, `${w.file}: ${step.uses}`);
        }
      }
      assert.ok(w.doc.permissions, `${w.file}: explicit token permissions`);
    }
  });

  test('ci: lint, type check, build and tests on Node 22 and 24', () => {
    const ci = workflow('ci.yml');
    assert.deepEqual(ci.doc.jobs.test.strategy.matrix.node, [22, 24]);
    const setup = steps(ci, 'test').find((s) => String(s.uses).startsWith('actions/setup-node@'));
    assert.match(setup?.with['node-version'], /^\$\{\{ matrix\.node \}\}$/);
    const commands = runs(ci, 'test');
    for (const expected of ['npm ci', 'npm run lint', 'npm run typecheck', 'npm run build', 'node --test']) {
      assert.ok(commands.includes(expected), `ci test job lacks "${expected}"`);
    }
    // Through npm the pinned Node 24 in node_modules/.bin would shadow the matrix version.
    assert.doesNotMatch(commands, /npm (run )?test\b/);
    assert.match(commands, /--ignore-scripts/);
  });

  test('ci: container tests on the official base image, chart lint and kustomize', () => {
    const ci = workflow('ci.yml');
    const container = ci.doc.jobs.container;
    const testStep = (container.steps as Manifest[]).find((s) => String(s.run).includes('test/container'));
    assert.equal(testStep?.env?.TOLLGATE_TEST_NODE_IMAGE, 'node:24-bookworm-slim');
    assert.equal(testStep?.env?.TOLLGATE_TEST_RUNTIME_IMAGE, 'gcr.io/distroless/nodejs24-debian12');
    assert.match(runs(ci, 'container'), /apt-get install -y -qq wrk/, 'the memory test needs wrk');
    const chart = runs(ci, 'chart');
    assert.match(chart, /helm lint --strict deploy\/helm\/tollgate/);
    assert.match(chart, /kubectl kustomize deploy\/kustomize\/overlays\/ingress/);
    assert.match(chart, /kubectl kustomize deploy\/kustomize\/overlays\/sidecar/);
  });

  test('image: buildx build of the Dockerfile, pushed only outside pull requests', () => {
    const image = workflow('image.yml');
    const build = steps(image, 'image').find((s) => String(s.uses).startsWith('docker/build-push-action@'));
    assert.ok(build, 'docker/build-push-action step');
    assert.match(build.with.push, /^\$\{\{ github\.event_name != 'pull_request' \}\}$/);
    assert.match(build.with.tags, /steps\.meta\.outputs\.tags/);
    assert.equal(image.doc.permissions.packages, 'write');
    const login = steps(image, 'image').find((s) => String(s.uses).startsWith('docker/login-action@'));
    assert.equal(login?.if, "github.event_name != 'pull_request'");
  });

  test('kind: installs the chart into kind, gets a token and a proxied URL with it', () => {
    const kind = workflow('kind.yml');
    const job = Object.keys(kind.doc.jobs)[0] as string;
    assert.ok(uses(kind, job).some((u) => u.startsWith('helm/kind-action@')));
    const commands = runs(kind, job);
    assert.match(commands, /docker build -t tollgate:e2e/);
    assert.match(commands, /kind load docker-image tollgate:e2e/);
    assert.match(commands, /helm install .*deploy\/helm\/tollgate/s);
    assert.match(commands, /-f deploy\/helm\/tollgate\/ci\/kind-values\.yaml/);
    assert.match(commands, /helm test/);
    assert.match(commands, /POST http:\/\/127\.0\.0\.1:\d+\/jwt/);
    assert.match(commands, /Authorization: Bearer \$TOKEN/);
    assert.match(commands, /= 401/, 'the proxied URL is refused without the token');
  });

  test('kind: the oldest and newest supported Kubernetes minors, both Kustomize overlays', async () => {
    const kind = workflow('kind.yml');
    const job = Object.keys(kind.doc.jobs)[0] as string;
    const matrix = kind.doc.jobs[job].strategy.matrix;
    assert.deepEqual(matrix.kubernetes, ['1.30', '1.33']);
    for (const entry of matrix.include as Manifest[]) {
      assert.match(
        entry.node_image,
        new RegExp(`^kindest/node:v${entry.kubernetes.replace('.', '\\.')}\\.\\d+$`),
      );
    }
    const setup = steps(kind, job).find((s) => String(s.uses).startsWith('helm/kind-action@'));
    assert.equal(setup?.with.node_image, `\${{ matrix.node_image }}`);
    // The chart's kubeVersion starts at the oldest minor tested.
    const chart = parse(await readFile(join(ROOT, 'deploy/helm/tollgate/Chart.yaml'), 'utf8')) as Manifest;
    assert.equal(chart.kubeVersion, `>=${matrix.kubernetes[0]}.0-0`);
    const commands = runs(kind, job);
    assert.match(commands, /for overlay in ingress sidecar/);
    assert.match(commands, /rollout status deployment\/example-app/);
    assert.match(commands, /rollout restart deployment\/example-app/);
  });

  test('kind values point the e2e release at the locally loaded image', async () => {
    const [values] = splitManifests(
      await readFile(join(ROOT, 'deploy/helm/tollgate/ci/kind-values.yaml'), 'utf8'),
    );
    assert.deepEqual(values?.image, { repository: 'tollgate', tag: 'e2e', pullPolicy: 'Never' });
    assert.equal(values?.upstreams.config.upstreams.DEFAULT.paths['/'].authorization.type, 'jwt');
  });
});
