import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { before, describe, test } from 'node:test';
import {
  containerPortNumber,
  find,
  findAll,
  KUSTOMIZE,
  kustomize,
  type Manifest,
  mountedFile,
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
  assertAdminNarrowed(policy, 9090, what);
}

/** The admin port is open to Prometheus pods only, in a rule of its own (docs/security.md). */
function assertAdminNarrowed(policy: Manifest, adminPort: number, what: string): void {
  const adminRules = policy.spec.ingress.filter((r: Manifest) =>
    r.ports.some((p: Manifest) => p.port === adminPort),
  );
  assert.equal(adminRules.length, 1, `${what}: one rule for the admin port`);
  assert.deepEqual(adminRules[0].ports, [{ port: adminPort, protocol: 'TCP' }]);
  assert.deepEqual(
    adminRules[0].from,
    [{ namespaceSelector: {}, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } } }],
    `${what}: the admin port must not be open to every pod`,
  );
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

describe('kustomize overlay: sidecar (the sidecar component)', () => {
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
    const { upstreamsConfigMapName } = assertPodContract(manifests, deployment.spec.template.spec, 'sidecar');
    assert.equal(upstreamsConfigMapName, 'example-app-tollgate-upstreams', 'named after the app, no hash');
  });

  test('every port a Service or probe targets on the sidecar is a number (named ones need Kubernetes 1.32)', () => {
    const sidecar = tollgateContainer(deployment.spec.template.spec);
    for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
      assert.equal(typeof sidecar[probe].httpGet.port, 'number', probe);
    }
    const services = findAll(manifests, 'Service');
    assert.deepEqual(services.map((s) => s.metadata.name).sort(), [
      'example-app',
      'example-app-tollgate-token',
    ]);
    for (const service of services) {
      assert.ok(
        selects(service.spec.selector, deployment.spec.template.metadata.labels),
        service.metadata.name,
      );
      for (const port of service.spec.ports as Manifest[]) {
        assert.equal(
          typeof port.targetPort,
          'number',
          `${service.metadata.name} targetPort ${port.targetPort}`,
        );
      }
    }
    assert.equal(find(manifests, 'Service', 'example-app').spec.ports[0].targetPort, 8080);
    assert.equal(find(manifests, 'Service', 'example-app-tollgate-token').spec.ports[0].targetPort, 8081);
  });

  test('the app container has a preStop that outlasts endpoint removal: the kubelet’s sleep action', () => {
    const spec = deployment.spec.template.spec;
    const app = spec.containers.find((c: Manifest) => c.name === 'app');
    // Nothing on the network (no httpGet to the admin port) may start or stretch it.
    assert.deepEqual(Object.keys(app.lifecycle?.preStop ?? {}), ['sleep'], 'app preStop is a sleep action');
    const seconds = app.lifecycle.preStop.sleep.seconds;
    assert.ok(Number.isInteger(seconds) && seconds >= 5, `sleep of ${seconds} s`);
    const main = parseYaml(mountedFile(manifests, spec, 'main.yaml'));
    assert.ok(
      spec.terminationGracePeriodSeconds >=
        seconds + main.shutdown_delay_seconds + main.shutdown_grace_seconds,
      'the grace period covers the app drain, then Tollgate’s delay and grace',
    );
  });

  test('the token API and NetworkPolicy are this app’s, selecting its pods', () => {
    const labels = deployment.spec.template.metadata.labels;
    const policy = find(manifests, 'NetworkPolicy', 'example-app-tollgate');
    assert.ok(selects(policy.spec.podSelector.matchLabels, labels));
    assertAdminNarrowed(policy, 9090, 'sidecar');
    const tokenRule = policy.spec.ingress.find((r: Manifest) =>
      r.ports.some((p: Manifest) => p.port === 8081),
    );
    assert.ok(tokenRule.from?.length > 0, 'the token API must not be open to every pod');
    assert.match(
      findAll(manifests, 'ConfigMap').find((c) => c.metadata.name.startsWith('example-app-tollgate-main'))
        ?.metadata.name,
      /^example-app-tollgate-main-[a-z0-9]{10}$/,
      'main.yaml carries a content hash so a change rolls the pods',
    );
  });

  test('the app is reached only through Tollgate on loopback', () => {
    const spec = deployment.spec.template.spec;
    const app = spec.containers.find((c: Manifest) => c.name === 'app');
    assert.ok(app.args.includes('-listen=127.0.0.1:5678'), 'the app listens on loopback only');
    assert.equal(app.ports, undefined, 'the app exposes no port');
    const routes = parseYaml(mountedFile(manifests, spec, 'upstreams.yaml'));
    assert.deepEqual(routes.upstreams.DEFAULT.paths['/'].servers, ['127.0.0.1:5678']);
    assert.equal(app.securityContext.readOnlyRootFilesystem, true);
  });

  test('two apps using the component in one namespace never share or overwrite an object', async () => {
    const work = await mkdtemp(join(tmpdir(), 'tollgate-two-apps-'));
    try {
      const source = join(KUSTOMIZE, 'overlays', 'sidecar');
      for (const app of ['shop', 'blog']) {
        await mkdir(join(work, app));
        for (const file of ['deployment.yaml', 'service.yaml', 'upstreams.yaml', 'kustomization.yaml']) {
          let text = await readFile(join(source, file), 'utf8');
          text = text
            .replaceAll('example-app', app)
            .replace(
              '../../components/sidecar',
              relative(join(work, app), join(KUSTOMIZE, 'components', 'sidecar')),
            );
          if (file === 'upstreams.yaml') text = text.replaceAll('5678', app === 'shop' ? '5001' : '5002');
          await writeFile(join(work, app, file), text);
        }
      }
      await writeFile(join(work, 'kustomization.yaml'), 'resources:\n  - shop\n  - blog\n');
      const both = await kustomize(work);
      const ids = both.map((m) => `${m.kind}/${m.metadata.name}`);
      assert.deepEqual(
        ids.filter((id, i) => ids.indexOf(id) !== i),
        [],
        'duplicate objects',
      );
      for (const app of ['shop', 'blog']) {
        const spec = find(both, 'Deployment', app).spec.template.spec;
        const routes = parseYaml(mountedFile(both, spec, 'upstreams.yaml'));
        assert.deepEqual(routes.upstreams.DEFAULT.paths['/'].servers, [
          `127.0.0.1:${app === 'shop' ? 5001 : 5002}`,
        ]);
        const token = find(both, 'Service', `${app}-tollgate-token`);
        assert.ok(selects(token.spec.selector, find(both, 'Deployment', app).spec.template.metadata.labels));
        const other = find(both, 'Deployment', app === 'shop' ? 'blog' : 'shop');
        assert.equal(selects(token.spec.selector, other.spec.template.metadata.labels), false);
      }
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });
});

describe('kustomize: no credential in a ConfigMap', () => {
  /** Keys of upstreams.yaml / main.yaml that carry a secret value (not a file path). */
  const SECRET_KEYS = new Set([
    'creds',
    'data',
    'password',
    'password_hash',
    'keys',
    'key',
    'masterkey',
    'master_key',
  ]);
  const secretKeysIn = (value: unknown, path: string, found: string[]) => {
    if (Array.isArray(value)) {
      for (const [i, item] of value.entries()) secretKeysIn(item, `${path}[${i}]`, found);
    } else if (value && typeof value === 'object') {
      for (const [key, child] of Object.entries(value)) {
        if (SECRET_KEYS.has(key)) found.push(`${path}.${key}`);
        secretKeysIn(child, `${path}.${key}`, found);
      }
    }
    return found;
  };

  test('the check finds a planted credential', () => {
    assert.deepEqual(secretKeysIn(parseYaml('a:\n  authorization: {type: basic, creds: "u:p"}\n'), '', []), [
      '.a.authorization.creds',
    ]);
  });

  for (const overlay of ['ingress', 'sidecar']) {
    test(`${overlay}: every ConfigMap file is free of credentials (the masterkey comes from a Secret)`, async () => {
      const manifests = await kustomize(join(KUSTOMIZE, 'overlays', overlay));
      for (const configMap of findAll(manifests, 'ConfigMap')) {
        for (const [file, text] of Object.entries(configMap.data as Record<string, string>)) {
          assert.deepEqual(secretKeysIn(parseYaml(text), '', []), [], `${configMap.metadata.name} ${file}`);
        }
      }
    });
  }
});
