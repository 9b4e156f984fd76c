/**
 * The chart's access to the Kubernetes API for the provider (docs/kubernetes.md): namespaced RBAC
 * with get/list/watch on exactly what Tollgate reads, and a ServiceAccount token mounted only then.
 * Checked on `helm template` output, rule by rule, and the rendered config through `tollgate validate`.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { MAIN_JS } from '../helpers/tollgate.ts';
import {
  CHART,
  find,
  findAll,
  helm,
  helmTemplate,
  type Manifest,
  mountedFile,
  parseYaml,
  validateAll,
} from './manifests.ts';

const run = promisify(execFile);

/** Ingress mode routing two hosts to two Services by name (the example in docs/kubernetes.md). */
const INGRESS_TO_TWO_SERVICES = {
  kubernetes: { enabled: true },
  upstreams: {
    config: {
      provider: 'kubernetes',
      upstreams: {
        'shop.example.com': { paths: { '/': { service: 'storefront:http' } } },
        'api.example.com': {
          paths: { '/': { service: 'orders.backend:8080', authorization: { type: 'jwt' } } },
        },
      },
    },
  },
};

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tollgate-helm-k8s-'));
});
after(() => rm(dir, { recursive: true, force: true }));

async function render(values: object): Promise<Manifest[]> {
  const file = join(dir, `values-${Math.random().toString(36).slice(2)}.yaml`);
  await writeFile(file, stringify(values));
  return helmTemplate({ valuesFiles: [file] });
}

const podSpec = (manifests: Manifest[]) => find(manifests, 'Deployment').spec.template.spec;
const READ_ONLY = ['get', 'list', 'watch'];

describe('helm chart: Kubernetes provider RBAC', () => {
  test('off by default: no Role, no binding, no token in the pod', async () => {
    const manifests = await helmTemplate();
    assert.deepEqual(findAll(manifests, 'Role'), []);
    assert.deepEqual(findAll(manifests, 'RoleBinding'), []);
    assert.deepEqual(findAll(manifests, 'ClusterRole'), []);
    assert.equal(podSpec(manifests).automountServiceAccountToken, false);
    assert.equal(find(manifests, 'ServiceAccount').automountServiceAccountToken, false);
  });

  test('provider on: one namespaced Role reading EndpointSlices (and getting Services), bound to the pods’ ServiceAccount', async () => {
    const manifests = await render(INGRESS_TO_TWO_SERVICES);
    await validateAll(manifests);
    assert.deepEqual(findAll(manifests, 'ClusterRole'), []);
    assert.deepEqual(findAll(manifests, 'ClusterRoleBinding'), []);
    const roles = findAll(manifests, 'Role');
    assert.deepEqual(
      roles.map((r) => r.metadata.namespace),
      ['edge'],
    );
    const [role] = roles as [Manifest];
    assert.deepEqual(role.rules, [
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: READ_ONLY },
      { apiGroups: [''], resources: ['services'], verbs: ['get'] },
    ]);

    const binding = find(manifests, 'RoleBinding');
    assert.equal(binding.metadata.namespace, 'edge');
    assert.deepEqual(binding.roleRef, {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: role.metadata.name,
    });
    const account = find(manifests, 'ServiceAccount');
    assert.deepEqual(binding.subjects, [
      { kind: 'ServiceAccount', name: account.metadata.name, namespace: 'edge' },
    ]);
    const spec = podSpec(manifests);
    assert.equal(spec.serviceAccountName, account.metadata.name);
    assert.equal(spec.automountServiceAccountToken, true, 'the provider needs the token');
    // No ConfigMap through the API unless asked: main.yaml has no kubernetes block.
    assert.equal(parseYaml(mountedFile(manifests, spec, 'main.yaml')).kubernetes, undefined);
  });

  test('upstreamsFromApi: a second rule for exactly the upstreams ConfigMap, named in main.yaml', async () => {
    const manifests = await render({
      ...INGRESS_TO_TWO_SERVICES,
      kubernetes: { enabled: true, upstreamsFromApi: true },
    });
    await validateAll(manifests);
    const spec = podSpec(manifests);
    const main = parseYaml(mountedFile(manifests, spec, 'main.yaml'));
    const configMapName = main.kubernetes.upstreams_configmap as string;
    // The ConfigMap the API is asked for is the one the chart renders and mounts (start-up copy).
    const upstreamsMap = find(manifests, 'ConfigMap', configMapName);
    assert.ok(upstreamsMap.data['upstreams.yaml'].includes('provider: kubernetes'));
    assert.deepEqual(find(manifests, 'Role').rules, [
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: READ_ONLY },
      { apiGroups: [''], resources: ['services'], verbs: ['get'] },
      { apiGroups: [''], resources: ['configmaps'], resourceNames: [configMapName], verbs: READ_ONLY },
    ]);
  });

  test('serviceNamespaces: an EndpointSlice (and Service get) Role and binding in each, for the release’s ServiceAccount', async () => {
    const manifests = await render({
      ...INGRESS_TO_TWO_SERVICES,
      kubernetes: { enabled: true, upstreamsFromApi: true, serviceNamespaces: ['backend', 'edge'] },
    });
    await validateAll(manifests);
    const roles = findAll(manifests, 'Role');
    assert.deepEqual(roles.map((r) => r.metadata.namespace).sort(), ['backend', 'edge']);
    const backend = roles.find((r) => r.metadata.namespace === 'backend') as Manifest;
    assert.deepEqual(backend.rules, [
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: READ_ONLY },
      { apiGroups: [''], resources: ['services'], verbs: ['get'] },
    ]);
    for (const binding of findAll(manifests, 'RoleBinding')) {
      assert.equal(binding.roleRef.name, backend.metadata.name);
      assert.deepEqual(
        binding.subjects.map((s: Manifest) => s.namespace),
        ['edge'],
      );
    }
  });

  test('refusals: provider: kubernetes without API access; upstreamsFromApi with a Secret', async () => {
    const file = join(dir, 'refused.yaml');
    await writeFile(file, stringify({ ...INGRESS_TO_TWO_SERVICES, kubernetes: { enabled: false } }));
    const noAccess = await helm([
      'template',
      't',
      CHART,
      '--kube-version',
      '1.30.0',
      '--set',
      'masterkey.value=x',
      '-f',
      file,
    ]);
    assert.equal(noAccess.ok, false);
    assert.match(noAccess.stderr, /provider: kubernetes: set kubernetes\.enabled=true/);
    await writeFile(
      file,
      stringify({
        ...INGRESS_TO_TWO_SERVICES,
        kubernetes: { enabled: true, upstreamsFromApi: true },
        upstreams: { ...INGRESS_TO_TWO_SERVICES.upstreams, createSecret: true },
      }),
    );
    const secret = await helm([
      'template',
      't',
      CHART,
      '--kube-version',
      '1.30.0',
      '--set',
      'masterkey.value=x',
      '-f',
      file,
    ]);
    assert.equal(secret.ok, false);
    assert.match(secret.stderr, /upstreamsFromApi reads a ConfigMap/);
  });

  test('the rendered main.yaml and upstreams.yaml pass tollgate validate, which names the Services', async () => {
    const manifests = await render({
      ...INGRESS_TO_TWO_SERVICES,
      kubernetes: { enabled: true, upstreamsFromApi: true },
    });
    const spec = podSpec(manifests);
    const podDir = await mkdtemp(join(dir, 'pod-'));
    await writeFile(join(podDir, 'main.yaml'), mountedFile(manifests, spec, 'main.yaml'));
    await writeFile(join(podDir, 'upstreams.yaml'), mountedFile(manifests, spec, 'upstreams.yaml'));
    await writeFile(join(podDir, 'masterkey'), 'a-masterkey-as-a-mounted-secret-would-hold\n');
    const { stdout } = await run(
      process.execPath,
      [MAIN_JS, 'validate', '--config', join(podDir, 'main.yaml')],
      {
        env: { ...process.env, TOLLGATE_CONFIG: '', TOLLGATE_MASTERKEY: '' },
        timeout: 30_000,
      },
    );
    assert.match(stdout, /would watch EndpointSlices of Service storefront in the pod's namespace/);
    assert.match(stdout, /would watch EndpointSlices of Service orders in backend, port 8080/);
    assert.match(stdout, /would watch ConfigMap tollgate-upstreams in the pod's namespace/);
  });
});
