import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { before, describe, test } from 'node:test';
import {
  containerPortNumber,
  find,
  findAll,
  ingressWithOidc,
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

describe('kustomize component: oidc (on the ingress overlay)', () => {
  let manifests: Manifest[];
  let plain: Manifest[];
  before(async () => {
    const work = await ingressWithOidc();
    try {
      manifests = await kustomize(work);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
    plain = await kustomize(join(KUSTOMIZE, 'overlays', 'ingress'));
  });
  const mainOf = (all: Manifest[]) =>
    parseYaml(mountedFile(all, find(all, 'Deployment', 'tollgate').spec.template.spec, 'main.yaml'));

  test('every manifest is valid and the pod follows the pod contract (secret files from Secrets)', async () => {
    await validateAll(manifests);
    assertPodContract(manifests, find(manifests, 'Deployment', 'tollgate').spec.template.spec, 'oidc');
  });

  test('main.yaml is the base’s plus exactly the OIDC keys, under a new content hash', () => {
    const { oidc_providers, session_secret_file, session_max_age_seconds, ...rest } = mainOf(manifests);
    assert.deepEqual(rest, mainOf(plain), 'components/oidc/main.yaml drifted from base/main.yaml');
    assert.equal(oidc_providers.corp.client_secret_file, 'oidc-corp-client-secret');
    assert.equal(session_secret_file, 'session-secrets');
    assert.equal(session_max_age_seconds, 28800);
    const name = (all: Manifest[]) =>
      find(all, 'Deployment', 'tollgate').spec.template.spec.volumes[0].projected.sources[0].configMap.name;
    assert.match(name(manifests), /^tollgate-main-[a-z0-9]{10}$/);
    assert.notEqual(name(manifests), name(plain), 'the pods roll when OIDC is added');
    assert.equal(
      findAll(manifests, 'ConfigMap').filter((c) => c.metadata.name.startsWith('tollgate-main')).length,
      1,
    );
  });

  test('the session and client Secrets are projected read-only beside main.yaml; nothing else changes', () => {
    const sources = (
      find(manifests, 'Deployment', 'tollgate').spec.template.spec.volumes[0].projected.sources as Manifest[]
    ).map((s) => s.secret ?? s.configMap);
    const before = (
      find(plain, 'Deployment', 'tollgate').spec.template.spec.volumes[0].projected.sources as Manifest[]
    ).map((s) => s.secret ?? s.configMap);
    assert.deepEqual(sources.slice(1, before.length), before.slice(1));
    assert.deepEqual(sources.slice(before.length), [
      {
        name: 'tollgate-oidc-session',
        items: [{ key: 'session-secrets', path: 'session-secrets', mode: 0o440 }],
      },
      {
        name: 'tollgate-oidc-corp',
        items: [{ key: 'client-secret', path: 'oidc-corp-client-secret', mode: 0o440 }],
      },
    ]);
    assert.equal(findAll(manifests, 'Secret').length, 0, 'no Secret is generated (a committed one is known)');
  });

  test('a Deployment whose first volume is not the config volume fails the build instead of being patched wrongly', async () => {
    const work = await ingressWithOidc();
    try {
      // A layer below the component puts another volume first.
      const copy = join(work, 'ingress');
      await mkdir(copy);
      await writeFile(
        join(copy, 'first-volume.yaml'),
        '- op: add\n  path: /spec/template/spec/volumes/0\n  value: {name: extra, emptyDir: {}}\n',
      );
      await writeFile(
        join(copy, 'kustomization.yaml'),
        `resources:\n  - ${relative(copy, join(KUSTOMIZE, 'overlays', 'ingress'))}\npatches:\n  - path: first-volume.yaml\n    target: {kind: Deployment, name: tollgate}\n`,
      );
      await writeFile(
        join(work, 'kustomization.yaml'),
        `resources:\n  - ingress\ncomponents:\n  - ${relative(work, join(KUSTOMIZE, 'components', 'oidc'))}\n`,
      );
      await assert.rejects(kustomize(work), /testing value \/spec\/template\/spec\/volumes\/0\/name failed/);
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
    'client_secret',
    'session_secret',
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

  for (const overlay of ['ingress', 'sidecar', 'ingress + components/oidc']) {
    test(`${overlay}: every ConfigMap file is free of credentials (the masterkey comes from a Secret)`, async () => {
      const work = overlay.includes('oidc') ? await ingressWithOidc() : null;
      const manifests = await kustomize(work ?? join(KUSTOMIZE, 'overlays', overlay)).finally(
        () => work && rm(work, { recursive: true, force: true }),
      );
      for (const configMap of findAll(manifests, 'ConfigMap')) {
        for (const [file, text] of Object.entries(configMap.data as Record<string, string>)) {
          assert.deepEqual(secretKeysIn(parseYaml(text), '', []), [], `${configMap.metadata.name} ${file}`);
        }
      }
    });
  }
});
