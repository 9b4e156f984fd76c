import assert from 'node:assert/strict';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { isMap, isScalar, parseDocument, stringify, type YAMLMap } from 'yaml';
import {
  CHART,
  containerPortNumber,
  find,
  findAll,
  helm,
  helmTemplate,
  KUBE_VERSION,
  type Manifest,
  selects,
  splitManifests,
  TEST_MASTERKEY,
  tollgateContainer,
  validateAll,
} from './manifests.ts';
import { assertPodContract } from './pod-contract.ts';

const KIND_VALUES = join(CHART, 'ci', 'kind-values.yaml');

/** Everything optional switched on, existing ConfigMap/Secret, TLS, LoadBalancer. */
const EVERYTHING = {
  image: { digest: 'sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef' },
  tls: { enabled: true, secretName: 'edge-tls' },
  upstreams: { existingConfigMap: 'my-routes', existingConfigMapKey: 'routes.yaml' },
  masterkey: { existingSecret: 'my-masterkey', existingSecretKey: 'key' },
  service: { type: 'LoadBalancer', externalTrafficPolicy: 'Local', loadBalancerSourceRanges: ['10.0.0.0/8'] },
  networkPolicy: {
    enabled: true,
    adminFrom: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }],
  },
  podDisruptionBudget: { enabled: true, minAvailable: 1 },
  autoscaling: { enabled: true, minReplicas: 2, maxReplicas: 6, targetMemoryUtilizationPercentage: 80 },
  metrics: { serviceMonitor: { enabled: true, labels: { release: 'prometheus' } } },
  grafanaDashboard: { enabled: true },
  prometheusRule: { enabled: true, labels: { release: 'prometheus' } },
  config: {
    shutdownDelaySeconds: 10,
    shutdownGraceSeconds: 50,
    trustedProxies: ['10.0.0.0/8'],
    extra: { https_port: 8443 },
  },
  extraEnv: [{ name: 'TZ', value: 'UTC' }],
  podAnnotations: { team: 'edge' },
};

/** Token issuance off, no metrics Service, an explicit grace period. */
const MINIMAL = {
  podDisruptionBudget: { enabled: false },
  masterkey: { enabled: false },
  metrics: { service: { enabled: false }, podAnnotations: false },
  serviceAccount: { create: false },
  terminationGracePeriodSeconds: 60,
};

let dir: string;
const valuesFile = async (name: string, values: object) => {
  const file = join(dir, `${name}.yaml`);
  await writeFile(file, stringify(values));
  return file;
};

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tollgate-helm-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('helm lint', () => {
  for (const [name, values] of [
    ['default values and a masterkey', { masterkey: { value: TEST_MASTERKEY } }],
    ['kind e2e values', 'kind'],
    ['everything enabled', EVERYTHING],
    ['minimal', MINIMAL],
  ] as const) {
    test(name, async () => {
      const args = ['lint', CHART, '--strict', '--kube-version', KUBE_VERSION];
      if (values === 'kind') args.push('-f', KIND_VALUES);
      else if (values) args.push('-f', await valuesFile(name.replace(/\W/g, '-'), values));
      let result = await helm(args);
      if (!result.ok && /unknown flag: --kube-version/.test(result.stderr)) {
        result = await helm(
          args.filter((a, i, all) => a !== '--kube-version' && all[i - 1] !== '--kube-version'),
        );
      }
      assert.ok(result.ok, `helm lint failed:\n${result.stdout}\n${result.stderr}`);
      assert.match(result.stdout, /0 chart\(s\) failed/);
    });
  }
});

describe('helm template: default values', () => {
  let manifests: Manifest[];
  let deployment: Manifest;
  before(async () => {
    manifests = await helmTemplate();
    deployment = find(manifests, 'Deployment');
  });

  test('every manifest is valid against the Kubernetes schemas', async () => {
    await validateAll(manifests);
  });

  test('the pod follows the Tollgate pod contract', () => {
    const { main, upstreamsConfigMapName } = assertPodContract(
      manifests,
      deployment.spec.template.spec,
      'helm',
    );
    assert.equal(upstreamsConfigMapName, 'tollgate-upstreams');
    assert.equal(main.masterkey_file, 'masterkey');
    assert.equal(main.admin_address, '0.0.0.0:9090');
  });

  test('the token API has its own ClusterIP Service reaching the token port', () => {
    const service = find(manifests, 'Service', 'tollgate-token');
    assert.equal(service.spec.type, 'ClusterIP');
    const container = tollgateContainer(deployment.spec.template.spec);
    assert.equal(service.spec.ports.length, 1);
    assert.equal(containerPortNumber(container, service.spec.ports[0].targetPort), 8081);
    assert.ok(selects(service.spec.selector, deployment.spec.template.metadata.labels));
  });

  test('the proxy Service reaches the proxy port and the metrics Service the admin port', () => {
    const container = tollgateContainer(deployment.spec.template.spec);
    const proxy = find(manifests, 'Service', 'tollgate');
    assert.equal(containerPortNumber(container, proxy.spec.ports[0].targetPort), 8080);
    assert.ok(selects(proxy.spec.selector, deployment.spec.template.metadata.labels));
    const metrics = find(manifests, 'Service', 'tollgate-metrics');
    assert.equal(containerPortNumber(container, metrics.spec.ports[0].targetPort), 9090);
    assert.equal(deployment.spec.template.metadata.annotations['prometheus.io/port'], '9090');
  });

  test('a masterkey Secret is created and projected as a file readable by the pod group only', () => {
    const secret = find(manifests, 'Secret', 'tollgate-masterkey');
    const key = Buffer.from(secret.data.masterkey, 'base64').toString();
    assert.equal(key, TEST_MASTERKEY);
    const sources = deployment.spec.template.spec.volumes[0].projected.sources as Manifest[];
    const item = sources.find((s) => s.secret?.name === 'tollgate-masterkey')?.secret.items[0];
    assert.deepEqual(
      { key: item.key, path: item.path, mode: item.mode },
      { key: 'masterkey', path: 'masterkey', mode: 0o440 },
    );
    assert.equal(deployment.spec.template.spec.securityContext.fsGroup, 10001);
  });

  test('terminationGracePeriodSeconds defaults to delay + grace + 5', () => {
    assert.equal(deployment.spec.template.spec.terminationGracePeriodSeconds, 35);
  });

  test('the helm test pod checks the token API from inside the cluster', () => {
    const pod = find(manifests, 'Pod');
    assert.equal(pod.metadata.annotations['helm.sh/hook'], 'test');
    assert.match(pod.spec.containers[0].args[0], /\/jwt/);
    assert.equal(pod.metadata.labels['tollgate-client'], 'true');
  });

  test('the NetworkPolicy, when enabled, lets only Prometheus pods reach the admin port unless told otherwise', async () => {
    const adminRule = async (set: string[]) => {
      const policy = find(
        await helmTemplate({ set: ['networkPolicy.enabled=true', ...set] }),
        'NetworkPolicy',
      );
      const rules = policy.spec.ingress.filter((r: Manifest) =>
        r.ports.some((p: Manifest) => p.port === 9090),
      );
      assert.equal(rules.length, 1);
      assert.deepEqual(rules[0].ports, [{ port: 9090, protocol: 'TCP' }], 'a rule of its own');
      return rules[0];
    };
    assert.deepEqual((await adminRule([])).from, [
      { namespaceSelector: {}, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } } },
      // The helm test pod, which checks the admin Service.
      { podSelector: { matchLabels: { 'tollgate-test': 'true' } } },
    ]);
    assert.equal((await adminRule(['networkPolicy.adminFrom=null'])).from, undefined, 'empty: everyone');
  });

  test('optional objects are off by default; two replicas get a PodDisruptionBudget', () => {
    for (const kind of ['HorizontalPodAutoscaler', 'NetworkPolicy', 'ServiceMonitor']) {
      assert.equal(findAll(manifests, kind).length, 0, kind);
    }
    assert.equal(deployment.spec.replicas, 2);
    const pdb = find(manifests, 'PodDisruptionBudget');
    assert.equal(pdb.spec.minAvailable, 1);
    assert.ok(selects(pdb.spec.selector.matchLabels, deployment.spec.template.metadata.labels));
  });
});

describe('helm template: config changes', () => {
  const podTemplate = async (values: object) =>
    find(
      await helmTemplate({ valuesFiles: [await valuesFile(`v${Math.random()}`.replace('.', ''), values)] }),
      'Deployment',
    ).spec.template;

  test('an upstreams.yaml change leaves the pod template alone (hot reload, no rollout)', async () => {
    const routes = (server: string) => ({
      upstreams: {
        config: { provider: 'file', upstreams: { DEFAULT: { paths: { '/': { servers: [server] } } } } },
      },
    });
    const a = await podTemplate(routes('10.0.0.1:80'));
    const b = await podTemplate(routes('10.0.0.2:80'));
    assert.deepEqual(a, b);
    const keys = Object.keys(a.metadata.annotations).join(' ');
    assert.doesNotMatch(keys, /upstream/);
  });

  test('a chart upgrade alone leaves the pod template alone (no version labels on pods)', async () => {
    // The same chart under a new chart version, as `helm upgrade` to a chart-only release renders it.
    const bumped = join(dir, 'chart-bumped');
    await cp(CHART, bumped, { recursive: true });
    const chartYaml = await readFile(join(bumped, 'Chart.yaml'), 'utf8');
    await writeFile(join(bumped, 'Chart.yaml'), chartYaml.replace(/^version: .*$/m, 'version: 99.0.0'));
    const render = async (chart: string) => {
      const result = await helm([
        'template',
        'tollgate',
        chart,
        '--namespace',
        'edge',
        '--kube-version',
        KUBE_VERSION,
        '--set',
        `masterkey.value=${TEST_MASTERKEY}`,
      ]);
      assert.ok(result.ok, result.stderr);
      return find(splitManifests(result.stdout), 'Deployment');
    };
    const [current, upgraded] = await Promise.all([render(CHART), render(bumped)]);
    assert.notDeepEqual(
      current.metadata.labels,
      upgraded.metadata.labels,
      'the Deployment names the chart version',
    );
    assert.deepEqual(upgraded.spec.template, current.spec.template);
    assert.equal(current.spec.template.metadata.labels['helm.sh/chart'], undefined);
  });

  test('a main.yaml change rolls the pods through the checksum annotation', async () => {
    const a = await podTemplate({ config: { logLevel: 'info' } });
    const b = await podTemplate({ config: { logLevel: 'debug' } });
    assert.notEqual(
      a.metadata.annotations['checksum/main-config'],
      b.metadata.annotations['checksum/main-config'],
    );
  });
});

describe('helm template: everything enabled', () => {
  let manifests: Manifest[];
  let deployment: Manifest;
  before(async () => {
    manifests = await helmTemplate({ valuesFiles: [await valuesFile('everything', EVERYTHING)] });
    deployment = find(manifests, 'Deployment');
  });

  test('every manifest is valid against the Kubernetes schemas', async () => {
    await validateAll(manifests);
  });

  test('the pod follows the contract with the existing ConfigMap and Secret', () => {
    const spec = deployment.spec.template.spec;
    const sources = spec.volumes.find((v: Manifest) => v.name === 'config').projected.sources as Manifest[];
    assert.deepEqual(sources.find((s) => s.configMap?.name === 'my-routes')?.configMap.items, [
      { key: 'routes.yaml', path: 'upstreams.yaml' },
    ]);
    assert.deepEqual(sources.find((s) => s.secret?.name === 'my-masterkey')?.secret.items, [
      { key: 'key', path: 'masterkey', mode: 0o440 },
    ]);
    assert.equal(
      findAll(manifests, 'Secret').length,
      0,
      'no Secret is created when an existing one is named',
    );
    assert.equal(
      findAll(manifests, 'ConfigMap').filter((c) => c.metadata.name.includes('upstreams')).length,
      0,
      'no upstreams ConfigMap is created when an existing one is named',
    );
    // The existing ConfigMap is not rendered, so the contract is checked with a stand-in for it.
    const standIn = {
      kind: 'ConfigMap',
      metadata: { name: 'my-routes' },
      data: { 'routes.yaml': 'provider: file' },
    };
    const { main } = assertPodContract([...manifests, standIn], spec, 'helm everything');
    assert.equal(main.https_port, 8443, 'config.extra keys reach main.yaml');
    assert.equal(main.proxy_address_tls, '0.0.0.0:8443');
    assert.equal(main.tls_certificate, 'tls.crt');
    assert.equal(spec.terminationGracePeriodSeconds, 65);
  });

  test('TLS: certificate projected, https port on container and Service', () => {
    const spec = deployment.spec.template.spec;
    const container = tollgateContainer(spec);
    const tls = spec.volumes[0].projected.sources.find((s: Manifest) => s.secret?.name === 'edge-tls');
    assert.deepEqual(
      tls.secret.items.map((i: Manifest) => i.path),
      ['tls.crt', 'tls.key'],
    );
    const service = find(manifests, 'Service', 'tollgate');
    const https = service.spec.ports.find((p: Manifest) => p.name === 'https');
    assert.equal(containerPortNumber(container, https.targetPort), 8443);
    assert.equal(service.spec.type, 'LoadBalancer');
    assert.equal(service.spec.externalTrafficPolicy, 'Local');
  });

  test('the token Service stays ClusterIP even when the proxy Service is a LoadBalancer', () => {
    assert.equal(find(manifests, 'Service', 'tollgate-token').spec.type, 'ClusterIP');
  });

  test('the NetworkPolicy opens the token API only to labelled clients', () => {
    const policy = find(manifests, 'NetworkPolicy');
    assert.ok(selects(policy.spec.podSelector.matchLabels, deployment.spec.template.metadata.labels));
    const tokenRule = policy.spec.ingress.find((r: Manifest) =>
      r.ports.some((p: Manifest) => p.port === 8081),
    );
    assert.deepEqual(tokenRule.from, [{ podSelector: { matchLabels: { 'tollgate-client': 'true' } } }]);
    const proxyRule = policy.spec.ingress.find((r: Manifest) =>
      r.ports.some((p: Manifest) => p.port === 8080),
    );
    assert.equal(proxyRule.from, undefined, 'proxy open to all by default');
    assert.ok(
      proxyRule.ports.some((p: Manifest) => p.port === 8443),
      'TLS port allowed',
    );
    const adminRule = policy.spec.ingress.find((r: Manifest) =>
      r.ports.some((p: Manifest) => p.port === 9090),
    );
    assert.equal(
      adminRule.from[0].namespaceSelector.matchLabels['kubernetes.io/metadata.name'],
      'monitoring',
    );
  });

  test('HPA owns the replica count; PDB and ServiceMonitor select the right objects', () => {
    assert.equal(deployment.spec.replicas, undefined);
    const hpa = find(manifests, 'HorizontalPodAutoscaler');
    assert.deepEqual(hpa.spec.scaleTargetRef, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      name: 'tollgate',
    });
    assert.deepEqual(
      hpa.spec.metrics.map((m: Manifest) => [m.resource.name, m.resource.target.averageUtilization]),
      [
        ['cpu', 70],
        ['memory', 80],
      ],
    );
    const pdb = find(manifests, 'PodDisruptionBudget');
    assert.ok(selects(pdb.spec.selector.matchLabels, deployment.spec.template.metadata.labels));
    const monitor = find(manifests, 'ServiceMonitor');
    assert.equal(monitor.apiVersion, 'monitoring.coreos.com/v1');
    assert.equal(monitor.metadata.labels.release, 'prometheus');
    const metrics = find(manifests, 'Service', 'tollgate-metrics');
    assert.ok(selects(monitor.spec.selector.matchLabels, metrics.metadata.labels));
    assert.ok(metrics.spec.ports.some((p: Manifest) => p.name === monitor.spec.endpoints[0].port));
    assert.equal(monitor.spec.endpoints[0].path, '/metrics');
  });

  test('image digest wins over the tag', () => {
    assert.match(
      tollgateContainer(deployment.spec.template.spec).image,
      /^ghcr\.io\/tollgate\/tollgate@sha256:/,
    );
  });
});

describe('helm template: minimal', () => {
  test('no masterkey: no Secret, no masterkey_file; explicit grace period kept', async () => {
    const manifests = await helmTemplate({ valuesFiles: [await valuesFile('minimal', MINIMAL)] });
    await validateAll(manifests);
    const spec = find(manifests, 'Deployment').spec.template.spec;
    const { main } = assertPodContract(manifests, spec, 'helm minimal');
    assert.equal(main.masterkey_file, undefined);
    assert.equal(findAll(manifests, 'Secret').length, 0);
    assert.equal(findAll(manifests, 'ServiceAccount').length, 0);
    assert.equal(spec.serviceAccountName, 'default');
    assert.equal(spec.terminationGracePeriodSeconds, 60);
  });
});

describe('helm template: refused values', () => {
  const refused = async (values: object, message: RegExp) => {
    const file = await valuesFile(`bad${Math.random()}`.replace('.', ''), values);
    const result = await helm([
      'template',
      'tollgate',
      CHART,
      '--kube-version',
      KUBE_VERSION,
      '--set',
      `masterkey.value=${TEST_MASTERKEY}`,
      '-f',
      file,
    ]);
    assert.equal(result.ok, false, 'helm template should have failed');
    assert.match(result.stderr, message);
  };

  test('a grace period shorter than the shutdown sequence', () =>
    refused({ terminationGracePeriodSeconds: 20 }, /terminationGracePeriodSeconds \(20\) is shorter/));
  test('TLS without a Secret', () => refused({ tls: { enabled: true } }, /tls.secretName is required/));
  test('autoscaling without a target', () =>
    refused(
      { autoscaling: { enabled: true, targetCPUUtilizationPercentage: '' } },
      /needs targetCPUUtilizationPercentage/,
    ));
});

describe('NOTES.txt', () => {
  // helm template does not print NOTES.txt, so a copy of the chart renders it into a ConfigMap.
  const renderNotes = async (set: string[]) => {
    const copy = join(dir, `chart-${Math.random()}`.replace('.', ''));
    await cp(CHART, copy, { recursive: true });
    await writeFile(
      join(copy, 'templates', 'zz-notes-check.yaml'),
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes-check\ndata:\n  notes: |\n' +
        '{{ include (print $.Template.BasePath "/NOTES.txt") . | indent 4 }}\n',
    );
    const args = ['template', 'tollgate', copy, '--namespace', 'edge', '--kube-version', KUBE_VERSION];
    for (const pair of [`masterkey.value=${TEST_MASTERKEY}`, ...set]) args.push('--set', pair);
    const result = await helm(args);
    assert.ok(result.ok, result.stderr);
    return find(splitManifests(result.stdout), 'ConfigMap', 'notes-check').data.notes as string;
  };

  test('tells how to read the masterkey, get a token and use it', async () => {
    const notes = await renderNotes([]);
    assert.match(notes, /kubectl get secret --namespace edge tollgate-masterkey/);
    assert.match(notes, /jsonpath='\{\.data\.masterkey\}'/);
    assert.match(notes, /port-forward --namespace edge svc\/tollgate-token 8081:8081/);
    assert.match(notes, /curl -s -X POST http:\/\/127\.0\.0\.1:8081\/jwt/);
    assert.match(notes, /Authorization: Bearer \$TOKEN/);
    assert.match(notes, /kubectl edit configmap --namespace edge tollgate-upstreams/);
  });

  test('names the existing Secret key, and says when issuance is off', async () => {
    const existing = await renderNotes([
      'masterkey.existingSecret=keys',
      'masterkey.existingSecretKey=tollgate',
    ]);
    assert.match(existing, /secret --namespace edge keys/);
    assert.match(existing, /\{\.data\.tollgate\}/);
    const secret = await renderNotes(['upstreams.existingSecret=edge-routes']);
    assert.match(secret, /Routing lives in the Secret edge-routes \(key upstreams.yaml\)/);
    assert.match(secret, /kubectl edit secret --namespace edge edge-routes/);
    const off = await renderNotes(['masterkey.enabled=false']);
    assert.match(off, /token API\s+answers 503/);
    assert.doesNotMatch(off, /POST/);
  });
});

describe('values.yaml', () => {
  test('every value is documented by a "-- " comment (on it, or on the object holding it)', async () => {
    const doc = parseDocument(await readFile(join(CHART, 'values.yaml'), 'utf8'));
    const undocumented: string[] = [];
    const walk = (map: YAMLMap, path: string) => {
      map.items.forEach((pair, index) => {
        const key = isScalar(pair.key) ? String(pair.key.value) : '?';
        const comment =
          (isScalar(pair.key) ? pair.key.commentBefore : null) ?? (index === 0 ? map.commentBefore : null);
        if (comment?.includes('-- ')) return;
        if (isMap(pair.value) && pair.value.items.length > 0) walk(pair.value, `${path}${key}.`);
        else undocumented.push(`${path}${key}`);
      });
    };
    assert.ok(isMap(doc.contents));
    walk(doc.contents, '');
    assert.deepEqual(undocumented, []);
  });
});
