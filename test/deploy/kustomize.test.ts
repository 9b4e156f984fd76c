import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import {
  containerPortNumber,
  find,
  findAll,
  KUSTOMIZE,
  kustomize,
  type Manifest,
  parseYaml,
  selects,
  tollgateContainer,
  validateAll,
} from './manifests.ts';
import { assertPodContract } from './pod-contract.ts';

/** Checks shared by both overlays: the base's config, token Service and NetworkPolicy. */
function assertBase(manifests: Manifest[], podTemplate: Manifest, what: string) {
  const configMaps = findAll(manifests, 'ConfigMap');
  const main = configMaps.find((c) => c.metadata.name.startsWith('tollgate-main'));
  assert.ok(main, `${what}: main ConfigMap`);
  assert.match(
    main.metadata.name,
    /^tollgate-main-[a-z0-9]{10}$/,
    'main.yaml carries a content hash so a change rolls the pods',
  );
  const upstreams = find(manifests, 'ConfigMap', 'tollgate-upstreams');
  assert.ok(parseYaml(upstreams.data['upstreams.yaml']).upstreams, `${what}: upstreams.yaml content`);

  const token = find(manifests, 'Service', 'tollgate-token');
  assert.equal(token.spec.type, 'ClusterIP');
  assert.ok(
    selects(token.spec.selector, podTemplate.metadata.labels),
    `${what}: token Service selects the pods`,
  );
  assert.equal(
    containerPortNumber(tollgateContainer(podTemplate.spec), token.spec.ports[0].targetPort),
    8081,
  );

  const policy = find(manifests, 'NetworkPolicy', 'tollgate');
  assert.ok(selects(policy.spec.podSelector.matchLabels, podTemplate.metadata.labels));
  const tokenRule = policy.spec.ingress.find((r: Manifest) => r.ports.some((p: Manifest) => p.port === 8081));
  assert.ok(tokenRule.from?.length > 0, `${what}: the token API must not be open to every pod`);
}

describe('kustomize overlay: ingress', () => {
  let manifests: Manifest[];
  let deployment: Manifest;
  before(async () => {
    manifests = await kustomize(join(KUSTOMIZE, 'overlays', 'ingress'));
    deployment = find(manifests, 'Deployment', 'tollgate');
  });

  test('every manifest is valid against the Kubernetes schemas', async () => {
    await validateAll(manifests);
  });

  test('the pod follows the Tollgate pod contract', () => {
    const { upstreamsConfigMapName } = assertPodContract(manifests, deployment.spec.template.spec, 'ingress');
    assert.equal(
      upstreamsConfigMapName,
      'tollgate-upstreams',
      'upstreams ConfigMap keeps a fixed name (hot reload)',
    );
    assert.match(tollgateContainer(deployment.spec.template.spec).image, /^ghcr\.io\/tollgate\/tollgate:/);
  });

  test('base config, token Service and NetworkPolicy apply to the ingress pods', () => {
    assertBase(manifests, deployment.spec.template, 'ingress');
  });

  test('the overlay replaces the routing and adds proxy and metrics Services', () => {
    const routes = parseYaml(find(manifests, 'ConfigMap', 'tollgate-upstreams').data['upstreams.yaml']);
    assert.ok(routes.upstreams['api.example.com']);
    const container = tollgateContainer(deployment.spec.template.spec);
    const proxy = find(manifests, 'Service', 'tollgate');
    assert.equal(containerPortNumber(container, proxy.spec.ports[0].targetPort), 8080);
    const metrics = find(manifests, 'Service', 'tollgate-metrics');
    assert.equal(containerPortNumber(container, metrics.spec.ports[0].targetPort), 9090);
    const pdb = find(manifests, 'PodDisruptionBudget', 'tollgate');
    assert.ok(selects(pdb.spec.selector.matchLabels, deployment.spec.template.metadata.labels));
  });
});

describe('kustomize overlay: sidecar', () => {
  let manifests: Manifest[];
  let deployment: Manifest;
  before(async () => {
    manifests = await kustomize(join(KUSTOMIZE, 'overlays', 'sidecar'));
    deployment = find(manifests, 'Deployment', 'example-app');
  });

  test('every manifest is valid against the Kubernetes schemas', async () => {
    await validateAll(manifests);
  });

  test('Tollgate is a native sidecar: an init container with restartPolicy Always and a startup probe', () => {
    const spec = deployment.spec.template.spec;
    assert.equal(
      spec.containers.some((c: Manifest) => c.name === 'tollgate'),
      false,
      'not a regular container',
    );
    const sidecar = spec.initContainers.find((c: Manifest) => c.name === 'tollgate');
    assert.equal(sidecar.restartPolicy, 'Always');
    assert.ok(sidecar.startupProbe, 'the app waits for the startup probe');
  });

  test('the pod follows the Tollgate pod contract', () => {
    assertPodContract(manifests, deployment.spec.template.spec, 'sidecar');
  });

  test('base config, token Service and NetworkPolicy apply to the app pods', () => {
    assertBase(manifests, deployment.spec.template, 'sidecar');
  });

  test('the app is reached only through Tollgate on loopback', () => {
    const spec = deployment.spec.template.spec;
    const app = spec.containers.find((c: Manifest) => c.name === 'app');
    assert.ok(app.args.includes('-listen=127.0.0.1:5678'), 'the app listens on loopback only');
    assert.equal(app.ports, undefined, 'the app exposes no port');
    const routes = parseYaml(find(manifests, 'ConfigMap', 'tollgate-upstreams').data['upstreams.yaml']);
    assert.deepEqual(routes.upstreams.DEFAULT.paths['/'].servers, ['127.0.0.1:5678']);
    const service = find(manifests, 'Service', 'example-app');
    assert.equal(containerPortNumber(tollgateContainer(spec), service.spec.ports[0].targetPort), 8080);
    assert.equal(app.securityContext.readOnlyRootFilesystem, true);
  });
});
