/**
 * The chart as an ingress controller (docs/ingress.md): an IngressClass, least-privilege RBAC (a
 * ClusterRole for every namespace, or namespaced Roles when watchNamespaces lists some; Secrets only
 * with readSecrets; Ingress status and Events the only writes), the token mounted, and main.yaml's
 * `kubernetes` block accepted by `tollgate validate`. Checked on `helm template` output.
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
  find,
  findAll,
  helmTemplate,
  type Manifest,
  mountedFile,
  parseYaml,
  validateAll,
} from './manifests.ts';

const run = promisify(execFile);
const READ_ONLY = ['get', 'list', 'watch'];
const rule = (apiGroup: string, resource: string, verbs = READ_ONLY) => ({
  apiGroups: [apiGroup],
  resources: [resource],
  verbs,
});
const INGRESS_RULES = [
  rule('networking.k8s.io', 'ingresses'),
  rule('networking.k8s.io', 'ingresses/status', ['patch', 'update']),
  rule('', 'services'),
  rule('discovery.k8s.io', 'endpointslices'),
  rule('', 'events', ['create', 'patch']),
];

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tollgate-helm-ingress-'));
});
after(() => rm(dir, { recursive: true, force: true }));

async function render(values: object): Promise<Manifest[]> {
  const file = join(dir, `values-${Math.random().toString(36).slice(2)}.yaml`);
  await writeFile(file, stringify(values));
  return helmTemplate({ valuesFiles: [file] });
}
const podSpec = (manifests: Manifest[]) => find(manifests, 'Deployment').spec.template.spec;
const mainYaml = (manifests: Manifest[]) =>
  parseYaml(mountedFile(manifests, podSpec(manifests), 'main.yaml'));

/** `tollgate validate` on the rendered main.yaml and upstreams.yaml, as the pod would see them. */
async function validates(manifests: Manifest[]): Promise<void> {
  const root = await mkdtemp(join(dir, 'mounted-'));
  const spec = podSpec(manifests);
  await writeFile(join(root, 'main.yaml'), mountedFile(manifests, spec, 'main.yaml'));
  await writeFile(join(root, 'upstreams.yaml'), mountedFile(manifests, spec, 'upstreams.yaml'));
  await writeFile(join(root, 'masterkey'), 'a-masterkey-as-a-mounted-secret-would-hold\n');
  await run(process.execPath, [MAIN_JS, 'validate', '--config', join(root, 'main.yaml')], {
    env: { ...process.env, TOLLGATE_CONFIG: '', TOLLGATE_MASTERKEY: '' },
    timeout: 30_000,
  });
}

describe('helm chart: Ingress controller', () => {
  test('off by default: no IngressClass, no ClusterRole', async () => {
    const manifests = await helmTemplate();
    assert.deepEqual(findAll(manifests, 'IngressClass'), []);
    assert.deepEqual(findAll(manifests, 'ClusterRole'), []);
    assert.equal(mainYaml(manifests).kubernetes, undefined);
  });

  test('every namespace: the IngressClass, one ClusterRole with exactly what is read and written', async () => {
    const manifests = await render({ ingressController: { enabled: true } });
    await validateAll(manifests);
    const ingressClass = find(manifests, 'IngressClass');
    assert.equal(ingressClass.metadata.name, 'tollgate');
    assert.equal(ingressClass.spec.controller, 'tollgate.io/ingress-controller');
    assert.equal(ingressClass.metadata.annotations, undefined, 'not the default class unless asked');
    const clusterRole = find(manifests, 'ClusterRole');
    assert.deepEqual(clusterRole.rules, [
      rule('networking.k8s.io', 'ingressclasses'),
      ...INGRESS_RULES,
      rule('', 'secrets'),
    ]);
    const binding = find(manifests, 'ClusterRoleBinding');
    assert.equal(binding.roleRef.name, clusterRole.metadata.name);
    assert.deepEqual(binding.subjects, [
      { kind: 'ServiceAccount', name: find(manifests, 'ServiceAccount').metadata.name, namespace: 'edge' },
    ]);
    assert.deepEqual(findAll(manifests, 'Role'), []);
    assert.equal(podSpec(manifests).automountServiceAccountToken, true);
    const proxyService = find(manifests, 'Service', find(manifests, 'Deployment').metadata.name);
    assert.deepEqual(mainYaml(manifests).kubernetes, {
      ingress_class: 'tollgate',
      publish_service: `edge/${proxyService.metadata.name}`,
    });
    await validates(manifests);
  });

  test('watchNamespaces: namespaced Roles, the ClusterRole only for IngressClasses; no Secrets without readSecrets', async () => {
    const manifests = await render({
      ingressController: {
        enabled: true,
        className: 'public',
        defaultClass: true,
        watchNamespaces: ['apps', 'shop'],
        readSecrets: false,
        publishService: 'lb/front',
      },
    });
    await validateAll(manifests);
    assert.equal(
      find(manifests, 'IngressClass').metadata.annotations['ingressclass.kubernetes.io/is-default-class'],
      'true',
    );
    assert.deepEqual(find(manifests, 'ClusterRole').rules, [rule('networking.k8s.io', 'ingressclasses')]);
    const roles = findAll(manifests, 'Role');
    assert.deepEqual(roles.map((r) => r.metadata.namespace).sort(), ['apps', 'lb', 'shop']);
    for (const role of roles.filter((r) => r.metadata.namespace !== 'lb'))
      assert.deepEqual(role.rules, INGRESS_RULES);
    assert.deepEqual((roles.find((r) => r.metadata.namespace === 'lb') as Manifest).rules, [
      { apiGroups: [''], resources: ['services'], resourceNames: ['front'], verbs: READ_ONLY },
    ]);
    for (const binding of findAll(manifests, 'RoleBinding')) {
      assert.deepEqual(
        binding.subjects.map((s: Manifest) => s.namespace),
        ['edge'],
      );
    }
    assert.deepEqual(mainYaml(manifests).kubernetes, {
      ingress_class: 'public',
      watch_namespaces: ['apps', 'shop'],
      publish_service: 'lb/front',
    });
    await validates(manifests);
  });

  test('publishAddress replaces the publish Service', async () => {
    const manifests = await render({
      ingressController: { enabled: true, watchNamespaces: ['apps'], publishAddress: ['203.0.113.9'] },
    });
    assert.deepEqual(mainYaml(manifests).kubernetes.publish_address, ['203.0.113.9']);
    assert.equal(mainYaml(manifests).kubernetes.publish_service, undefined);
    assert.deepEqual(
      findAll(manifests, 'Role').map((r) => r.metadata.namespace),
      ['apps'],
    );
    await validates(manifests);
  });
});
