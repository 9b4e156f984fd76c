/**
 * The chart serving the Gateway API (docs/gateway-api.md): a GatewayClass naming Tollgate's
 * controller, the TollgatePolicy CRD, least-privilege RBAC for the Gateway API kinds and their status
 * (a ClusterRole for every namespace, or namespaced Roles when watchNamespaces lists some), and
 * main.yaml's `kubernetes.gateway_class` accepted by `tollgate validate`. Checked on `helm template`.
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
const STATUS = ['get', 'patch', 'update'];
const GATEWAY_GROUP = 'gateway.networking.k8s.io';
const NAMESPACED_RULES = [
  {
    apiGroups: [GATEWAY_GROUP],
    resources: ['gateways', 'httproutes', 'grpcroutes', 'referencegrants'],
    verbs: READ_ONLY,
  },
  {
    apiGroups: [GATEWAY_GROUP],
    resources: ['gateways/status', 'httproutes/status', 'grpcroutes/status'],
    verbs: STATUS,
  },
  { apiGroups: ['tollgate.io'], resources: ['tollgatepolicies'], verbs: READ_ONLY },
  { apiGroups: ['tollgate.io'], resources: ['tollgatepolicies/status'], verbs: STATUS },
  { apiGroups: [''], resources: ['services'], verbs: READ_ONLY },
  { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: READ_ONLY },
  { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
];
const CLUSTER_RULES = [
  { apiGroups: [GATEWAY_GROUP], resources: ['gatewayclasses'], verbs: READ_ONLY },
  { apiGroups: [GATEWAY_GROUP], resources: ['gatewayclasses/status'], verbs: STATUS },
  { apiGroups: [''], resources: ['namespaces'], verbs: READ_ONLY },
];

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tollgate-helm-gateway-'));
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

describe('helm chart: Gateway API', () => {
  test('off by default: no GatewayClass, no CRD', async () => {
    const manifests = await helmTemplate();
    assert.deepEqual(findAll(manifests, 'GatewayClass'), []);
    assert.deepEqual(findAll(manifests, 'CustomResourceDefinition'), []);
  });

  test('every namespace: GatewayClass, the TollgatePolicy CRD, one ClusterRole with exactly what is read and written', async () => {
    const manifests = await render({ gatewayAPI: { enabled: true } });
    await validateAll(manifests);
    const gatewayClass = find(manifests, 'GatewayClass');
    assert.equal(gatewayClass.metadata.name, 'tollgate');
    assert.equal(gatewayClass.spec.controllerName, 'tollgate.io/gateway-controller');
    const crd = find(manifests, 'CustomResourceDefinition');
    assert.equal(crd.metadata.name, 'tollgatepolicies.tollgate.io');
    assert.deepEqual(
      crd.spec.versions.map((v: Manifest) => [v.name, v.served, v.storage, v.subresources]),
      [['v1alpha1', true, true, { status: {} }]],
    );
    const clusterRole = find(manifests, 'ClusterRole');
    assert.deepEqual(clusterRole.rules, [
      ...CLUSTER_RULES,
      ...NAMESPACED_RULES,
      { apiGroups: [''], resources: ['secrets'], verbs: READ_ONLY },
      { apiGroups: [''], resources: ['configmaps'], verbs: READ_ONLY },
    ]);
    assert.equal(find(manifests, 'ClusterRoleBinding').roleRef.name, clusterRole.metadata.name);
    assert.equal(podSpec(manifests).automountServiceAccountToken, true);
    const proxyService = find(manifests, 'Service', find(manifests, 'Deployment').metadata.name);
    assert.deepEqual(mainYaml(manifests).kubernetes, {
      gateway_class: 'tollgate',
      publish_service: `edge/${proxyService.metadata.name}`,
    });
    await validates(manifests);
  });

  test('watchNamespaces: Roles per namespace, the ClusterRole only for classes and Namespaces; no Secrets without readSecrets; gatewayNames is kubernetes.gateway_names', async () => {
    const manifests = await render({
      gatewayAPI: {
        enabled: true,
        className: 'edge-gw',
        watchNamespaces: ['apps'],
        readSecrets: false,
        publishAddress: ['203.0.113.5'],
        gatewayNames: ['apps/edge'],
        createGatewayClass: false,
        installPolicyCRD: false,
      },
    });
    await validateAll(manifests);
    assert.deepEqual(findAll(manifests, 'GatewayClass'), []);
    assert.deepEqual(findAll(manifests, 'CustomResourceDefinition'), []);
    assert.deepEqual(find(manifests, 'ClusterRole').rules, CLUSTER_RULES);
    const roles = findAll(manifests, 'Role');
    assert.deepEqual(
      roles.map((r) => r.metadata.namespace),
      ['apps'],
    );
    assert.deepEqual(roles[0]?.rules, NAMESPACED_RULES);
    assert.deepEqual(mainYaml(manifests).kubernetes, {
      gateway_class: 'edge-gw',
      watch_namespaces: ['apps'],
      gateway_names: ['apps/edge'],
      publish_address: ['203.0.113.5'],
    });
    await validates(manifests);
  });

  test('beside the Ingress controller: one kubernetes block; different watchNamespaces are refused', async () => {
    const both = await render({ ingressController: { enabled: true }, gatewayAPI: { enabled: true } });
    const kubernetes = mainYaml(both).kubernetes;
    assert.equal(kubernetes.ingress_class, 'tollgate');
    assert.equal(kubernetes.gateway_class, 'tollgate');
    await validates(both);
    await assert.rejects(
      render({
        ingressController: { enabled: true, watchNamespaces: ['a'] },
        gatewayAPI: { enabled: true, watchNamespaces: ['b'] },
      }),
      /one main.yaml key/,
    );
  });
});
