/**
 * The chart's guard rails, checked on `helm template` output object by object: secrets never land in
 * a ConfigMap, the values schema rejects typos, PodDisruptionBudget rules, chart-owned main.yaml keys,
 * the masterkey requirement, the helm test pod (run for real against a Tollgate on loopback).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { isMap, isScalar, parseDocument, stringify, type YAMLMap } from 'yaml';
import { startTollgate } from '../helpers/tollgate.ts';
import { startUpstream } from '../helpers/upstream.ts';
import {
  CHART,
  find,
  findAll,
  helm,
  KUBE_VERSION,
  type Manifest,
  mountedFile,
  objectData,
  parseYaml,
  splitManifests,
  validateAll,
} from './manifests.ts';
import { assertPodContract } from './pod-contract.ts';

const run = promisify(execFile);

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tollgate-guards-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

let files = 0;
/** helm template with exactly these values (no test masterkey added): the raw result. */
async function render(values: object) {
  const file = join(dir, `values-${files++}.yaml`);
  await writeFile(file, stringify(values));
  return helm([
    'template',
    'tollgate',
    CHART,
    '--namespace',
    'edge',
    '--kube-version',
    KUBE_VERSION,
    '-f',
    file,
  ]);
}
async function rendered(values: object): Promise<Manifest[]> {
  const result = await render(values);
  assert.ok(result.ok, `helm template failed:\n${result.stderr}`);
  return splitManifests(result.stdout);
}
async function refused(values: object, message: RegExp) {
  const result = await render(values);
  assert.equal(result.ok, false, `helm template should have refused ${JSON.stringify(values)}`);
  assert.match(result.stderr, message);
  return result.stderr;
}
const podSpec = (manifests: Manifest[]) => find(manifests, 'Deployment').spec.template.spec;

// Values that look like nothing else in a render, so finding one anywhere is never a coincidence.
const SECRET = {
  masterkey: 'mk-7c1f0e9a2b4d-planted',
  basicPassword: 'pw-5e8d3c1a9f07-planted',
  apiKey: 'ak-2b6f9e4c8a13-planted',
  passwordHash: 'scrypt$planted$hash-8d2e',
  upstreamsMasterkey: 'umk-4a9c2e7f1b35-planted',
  redisPassword: 'rp-9f3b7d1e5c20-planted',
};
const ROUTES_WITH_CREDENTIALS = {
  provider: 'file',
  masterkey: SECRET.upstreamsMasterkey,
  upstreams: {
    'basic.example': {
      paths: {
        '/': {
          servers: ['10.0.0.1:80'],
          authorization: { type: 'basic', creds: `admin:${SECRET.basicPassword}` },
        },
      },
    },
    'users.example': {
      paths: {
        '/': {
          servers: ['10.0.0.2:80'],
          authorization: { type: 'basic', users: [{ username: 'ops', password_hash: SECRET.passwordHash }] },
        },
      },
    },
    'api.example': {
      paths: {
        '/': {
          servers: ['10.0.0.3:80'],
          authorization: { type: 'apikey', keys: [{ name: 'ci', key: SECRET.apiKey }] },
        },
      },
    },
  },
};

describe('no Secret value ever appears in a rendered ConfigMap', () => {
  const combinations: Array<[string, object]> = [
    ['masterkey value', { masterkey: { value: SECRET.masterkey } }],
    [
      'credentials in upstreams.config, rendered into a Secret',
      {
        masterkey: { value: SECRET.masterkey },
        upstreams: { createSecret: true, config: ROUTES_WITH_CREDENTIALS },
      },
    ],
    [
      'credentials in upstreams.config given as a string',
      {
        masterkey: { value: SECRET.masterkey },
        upstreams: { createSecret: true, config: stringify(ROUTES_WITH_CREDENTIALS) },
      },
    ],
    [
      'existing upstreams Secret, existing masterkey Secret, Redis URL from a Secret',
      {
        masterkey: { existingSecret: 'edge-masterkey' },
        upstreams: { existingSecret: 'edge-routes', existingSecretKey: 'routes.yaml' },
        config: { rateLimitRedisSecret: { name: 'edge-redis', key: 'url' } },
      },
    ],
    [
      'TLS, autoscaling, NetworkPolicy, ServiceMonitor and a credential-free Redis URL',
      {
        masterkey: { value: SECRET.masterkey },
        upstreams: { createSecret: true, config: ROUTES_WITH_CREDENTIALS },
        tls: { enabled: true, secretName: 'edge-tls' },
        autoscaling: { enabled: true, minReplicas: 3 },
        networkPolicy: { enabled: true },
        metrics: { serviceMonitor: { enabled: true } },
        config: { rateLimitRedis: 'redis://redis.edge.svc:6379/1', extra: { log_level: 'debug' } },
      },
    ],
  ];

  for (const [name, values] of combinations) {
    test(name, async () => {
      const manifests = await rendered(values);
      await validateAll(manifests);
      const configMapText = findAll(manifests, 'ConfigMap')
        .map((c) => Object.values(objectData(c)).join('\n'))
        .join('\n');
      for (const [what, value] of Object.entries(SECRET)) {
        assert.equal(configMapText.includes(value), false, `${what} found in a ConfigMap`);
      }
      // The planted values do reach the pod: through Secrets (so the check above can fail).
      const secretText = findAll(manifests, 'Secret')
        .map((s) => Object.values(objectData(s)).join('\n'))
        .join('\n');
      const masterkey = (values as { masterkey?: { value?: string } }).masterkey?.value;
      if (masterkey) assert.ok(secretText.includes(masterkey));
      if ((values as { upstreams?: { createSecret?: boolean } }).upstreams?.createSecret) {
        const upstreams = mountedFile(manifests, podSpec(manifests), 'upstreams.yaml');
        assert.ok(upstreams.includes(SECRET.basicPassword) && upstreams.includes(SECRET.apiKey));
        assert.equal(assertPodContract(manifests, podSpec(manifests), name).upstreamsFrom, 'Secret');
      }
    });
  }

  test('inline credentials bound for a ConfigMap are refused, naming the keys found', async () => {
    const message = await refused(
      { masterkey: { value: 'x' }, upstreams: { config: ROUTES_WITH_CREDENTIALS } },
      /upstreams.config holds credentials \(creds, password_hash, keys, key, masterkey\) and would be stored in a ConfigMap: set upstreams.createSecret=true/,
    );
    assert.equal(message.includes(SECRET.basicPassword), false, 'the refusal echoes a password');
    await refused(
      {
        masterkey: { value: 'x' },
        upstreams: {
          config:
            'upstreams:\n  a:\n    paths:\n      /:\n        servers: [x:1]\n        authorization: {type: apikey, data: k}\n',
        },
      },
      /holds credentials \(data\)/,
    );
  });

  test('main.yaml secrets in config.extra and a Redis URL with a password are refused', async () => {
    await refused(
      { masterkey: { value: 'x' }, config: { extra: { masterkey: SECRET.masterkey } } },
      /config.extra.masterkey is not allowed: the chart sets it; use masterkey.existingSecret or masterkey.value/,
    );
    await refused(
      { masterkey: { value: 'x' }, config: { extra: { rate_limit_redis: 'redis://r:6379' } } },
      /config.extra.rate_limit_redis is not allowed/,
    );
    const message = await refused(
      {
        masterkey: { value: 'x' },
        config: { rateLimitRedis: `redis://:${SECRET.redisPassword}@redis:6379` },
      },
      /config.rateLimitRedis carries credentials and would sit in a ConfigMap: .*config.rateLimitRedisSecret.name/,
    );
    assert.equal(message.includes(SECRET.redisPassword), false);
  });
});

describe('where each secret comes from', () => {
  test('upstreams.existingSecret is projected as upstreams.yaml, nothing is created for it', async () => {
    const manifests = await rendered({
      masterkey: { value: 'x' },
      upstreams: { existingSecret: 'edge-routes', existingSecretKey: 'routes.yaml' },
    });
    const sources = podSpec(manifests).volumes.find((v: Manifest) => v.name === 'config').projected.sources;
    assert.deepEqual(sources.find((s: Manifest) => s.secret?.name === 'edge-routes')?.secret.items, [
      { key: 'routes.yaml', path: 'upstreams.yaml', mode: 0o440 },
    ]);
    assert.equal(
      findAll(manifests, 'ConfigMap').filter((c) => c.metadata.name.includes('upstreams')).length,
      0,
    );
    assert.deepEqual(
      findAll(manifests, 'Secret').map((s) => s.metadata.name),
      ['tollgate-masterkey'],
    );
    // Hot reload is unchanged: nothing about upstreams.yaml is on the pod template.
    const annotations = Object.keys(find(manifests, 'Deployment').spec.template.metadata.annotations);
    assert.equal(
      annotations.some((a) => a.includes('upstream')),
      false,
    );
    await refused(
      { masterkey: { value: 'x' }, upstreams: { existingSecret: 'a', existingConfigMap: 'b' } },
      /upstreams.existingSecret and upstreams.existingConfigMap are both set/,
    );
  });

  test('the Redis URL Secret reaches the app as TOLLGATE_RATE_LIMIT_REDIS, and main.yaml has no URL', async () => {
    const manifests = await rendered({
      masterkey: { value: 'x' },
      config: {
        rateLimitRedis: 'redis://ignored:6379',
        rateLimitRedisSecret: { name: 'edge-redis', key: 'redis-url' },
      },
      extraEnv: [{ name: 'TZ', value: 'UTC' }],
    });
    const container = podSpec(manifests).containers.find((c: Manifest) => c.name === 'tollgate');
    assert.deepEqual(container.env, [
      {
        name: 'TOLLGATE_RATE_LIMIT_REDIS',
        valueFrom: { secretKeyRef: { name: 'edge-redis', key: 'redis-url' } },
      },
      { name: 'TZ', value: 'UTC' },
    ]);
    const main = parseYaml(mountedFile(manifests, podSpec(manifests), 'main.yaml'));
    assert.equal(main.rate_limit_redis, undefined);
  });

  test('the masterkey is required: a value or an existing Secret, never generated', async () => {
    await refused(
      {},
      /masterkey.existingSecret or masterkey.value is required \(or masterkey.enabled=false\)/,
    );
    const existing = await rendered({ masterkey: { existingSecret: 'edge-masterkey' } });
    assert.equal(findAll(existing, 'Secret').length, 0);
    const off = await rendered({ masterkey: { enabled: false } });
    assert.equal(findAll(off, 'Secret').length, 0);
  });

  test('a chart-managed masterkey is checksummed on the pod template; an existing Secret is not', async () => {
    const annotation = async (values: object) =>
      find(await rendered(values), 'Deployment').spec.template.metadata.annotations['checksum/masterkey'];
    const a = await annotation({ masterkey: { value: 'first-key' } });
    const b = await annotation({ masterkey: { value: 'second-key' } });
    assert.match(a, /^[0-9a-f]{64}$/);
    assert.notEqual(a, b, 'a changed key must roll the pods');
    assert.equal(a, await annotation({ masterkey: { value: 'first-key' } }), 'same key, same template');
    assert.equal(await annotation({ masterkey: { existingSecret: 's' } }), undefined);
  });
});

describe('listen addresses and files stay with the chart', () => {
  for (const [key, hint] of [
    ['admin_address', 'ports.admin'],
    ['proxy_address_http', 'ports.proxy'],
    ['config_address', 'ports.token'],
    ['proxy_address_tls', 'tls.enabled'],
    ['tls_certificate', 'tls.secretName'],
    ['upstreams_conf', 'upstreams'],
    ['masterkey_file', 'masterkey'],
  ] as Array<[string, string]>) {
    test(`config.extra.${key} is refused, pointing at ${hint}`, async () => {
      await refused(
        { masterkey: { value: 'x' }, config: { extra: { [key]: '0.0.0.0:1234' } } },
        new RegExp(`config.extra.${key} is not allowed: the chart sets it; use ${hint.replace('.', '\\.')}`),
      );
    });
  }

  test('other main.yaml keys in config.extra pass through', async () => {
    const manifests = await rendered({ masterkey: { value: 'x' }, config: { extra: { https_port: 8443 } } });
    assert.equal(parseYaml(mountedFile(manifests, podSpec(manifests), 'main.yaml')).https_port, 8443);
  });
});

describe('values.schema.json', () => {
  for (const [name, values, message] of [
    ['a misspelt top-level value', { replicas: 3 }, /Additional property replicas is not allowed/],
    ['a misspelt nested value', { image: { tagg: '1.0' } }, /image: Additional property tagg is not allowed/],
    [
      'a misspelt config key',
      { config: { logLevl: 'debug' } },
      /config: Additional property logLevl is not allowed/,
    ],
    [
      'a misspelt PDB switch',
      { podDisruptionBudget: { enable: true } },
      /Additional property enable is not allowed/,
    ],
    ['a wrong type', { replicaCount: 'two' }, /replicaCount: Invalid type/],
    [
      'an unknown log level',
      { config: { logLevel: 'verbose' } },
      /config.logLevel: config.logLevel must be one of/,
    ],
    [
      'an unknown Service type',
      { service: { type: 'Ingress' } },
      /service.type: service.type must be one of/,
    ],
    ['a port out of range', { ports: { admin: 70000 } }, /ports.admin: Must be less than or equal to 65535/],
    ['an unknown PDB mode', { podDisruptionBudget: { enabled: 'always' } }, /podDisruptionBudget.enabled/],
  ] as Array<[string, object, RegExp]>) {
    test(`rejects ${name}`, async () => {
      await refused({ masterkey: { value: 'x' }, ...values }, message);
    });
  }

  test('accepts upstreams.config as YAML text and every documented example', async () => {
    await rendered({ masterkey: { value: 'x' }, upstreams: { config: 'provider: file\nupstreams: {}\n' } });
    await rendered({
      masterkey: { value: 'x' },
      podDisruptionBudget: { enabled: false },
      terminationGracePeriodSeconds: 40,
    });
  });

  test('covers every value of values.yaml, and nothing else, each described', async () => {
    const schema = JSON.parse(await readFile(join(CHART, 'values.schema.json'), 'utf8')) as Manifest;
    const doc = parseDocument(await readFile(join(CHART, 'values.yaml'), 'utf8'));
    const missing: string[] = [];
    const undescribed: string[] = [];
    const walk = (map: YAMLMap, node: Manifest, path: string) => {
      const keys = map.items.map((pair) => (isScalar(pair.key) ? String(pair.key.value) : '?'));
      for (const key of Object.keys(node.properties ?? {})) {
        if (!keys.includes(key)) missing.push(`${path}${key} (in the schema, not in values.yaml)`);
      }
      for (const pair of map.items) {
        const key = isScalar(pair.key) ? String(pair.key.value) : '?';
        const child = node.properties?.[key] as Manifest | undefined;
        if (!child) {
          missing.push(`${path}${key}`);
          continue;
        }
        if (child.properties && isMap(pair.value)) walk(pair.value, child, `${path}${key}.`);
        else if (!child.description) undescribed.push(`${path}${key}`);
      }
    };
    assert.equal(schema.additionalProperties, false);
    assert.ok(isMap(doc.contents));
    walk(doc.contents, schema, '');
    assert.deepEqual(missing, [], 'values without a schema entry (or the reverse)');
    assert.deepEqual(undescribed, [], 'schema entries without a description');
  });
});

describe('PodDisruptionBudget', () => {
  const pdb = async (values: object) =>
    findAll(await rendered({ masterkey: { value: 'x' }, ...values }), 'PodDisruptionBudget');

  test('on by default with two replicas, off with one', async () => {
    assert.equal((await pdb({})).length, 1);
    assert.equal((await pdb({ replicaCount: 1 })).length, 0);
  });
  test('follows the autoscaler minimum, not replicaCount', async () => {
    assert.equal((await pdb({ replicaCount: 1, autoscaling: { enabled: true, minReplicas: 2 } })).length, 1);
    assert.equal((await pdb({ replicaCount: 3, autoscaling: { enabled: true, minReplicas: 1 } })).length, 0);
  });
  test('false turns it off', async () => {
    assert.equal((await pdb({ podDisruptionBudget: { enabled: false } })).length, 0);
  });
  test('refused with a single pod, or when it could never allow an eviction', async () => {
    await refused(
      { masterkey: { value: 'x' }, replicaCount: 1, podDisruptionBudget: { enabled: true } },
      /podDisruptionBudget.enabled is true with a single pod/,
    );
    await refused(
      {
        masterkey: { value: 'x' },
        autoscaling: { enabled: true, minReplicas: 1 },
        podDisruptionBudget: { enabled: true },
      },
      /with a single pod/,
    );
    await refused(
      { masterkey: { value: 'x' }, replicaCount: 2, podDisruptionBudget: { minAvailable: 2 } },
      /minAvailable \(2\) must be below the pod count \(2\)/,
    );
    await refused(
      { masterkey: { value: 'x' }, podDisruptionBudget: { maxUnavailable: 0 } },
      /maxUnavailable must be at least 1/,
    );
  });
  test('maxUnavailable replaces minAvailable', async () => {
    const [budget] = await pdb({ replicaCount: 4, podDisruptionBudget: { maxUnavailable: 1 } });
    assert.deepEqual([budget?.spec.maxUnavailable, budget?.spec.minAvailable], [1, undefined]);
  });
});

describe('topology spread', () => {
  const constraints = async (values: object) =>
    podSpec(await rendered({ masterkey: { value: 'x' }, ...values })).topologySpreadConstraints as Manifest[];
  const selector = { 'app.kubernetes.io/name': 'tollgate', 'app.kubernetes.io/instance': 'tollgate' };

  test('by default a soft spread over zones selecting the release pods of the same rollout', async () => {
    assert.deepEqual(await constraints({}), [
      {
        labelSelector: { matchLabels: selector },
        matchLabelKeys: ['pod-template-hash'],
        maxSkew: 1,
        topologyKey: 'topology.kubernetes.io/zone',
        whenUnsatisfiable: 'ScheduleAnyway',
      },
    ]);
  });
  test('a constraint without a selector gets the release selector; one with a selector keeps it', async () => {
    const [filled, kept] = await constraints({
      topologySpreadConstraints: [
        { maxSkew: 2, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'DoNotSchedule' },
        {
          maxSkew: 1,
          topologyKey: 'zone',
          whenUnsatisfiable: 'DoNotSchedule',
          labelSelector: { matchLabels: { a: 'b' } },
        },
      ],
    });
    assert.deepEqual(filled?.labelSelector, { matchLabels: selector });
    assert.equal(filled?.topologyKey, 'kubernetes.io/hostname');
    assert.deepEqual(kept?.labelSelector, { matchLabels: { a: 'b' } });
    assert.equal(kept?.matchLabelKeys, undefined);
  });
});

describe('helm test', () => {
  const values = {
    masterkey: { value: 'helm-test-masterkey' },
    networkPolicy: {
      enabled: true,
      proxyFrom: [{ namespaceSelector: { matchLabels: { team: 'web' } } }],
      tokenFrom: [{ namespaceSelector: { matchLabels: { team: 'auth' } } }],
      adminFrom: [{ namespaceSelector: { matchLabels: { team: 'monitoring' } } }],
    },
    tests: { proxy: { path: '/private/check', host: 'app.example', expectStatus: 200 } },
  };

  test('custom NetworkPolicy peers still admit the test pod on every port', async () => {
    const manifests = await rendered(values);
    const pod = find(manifests, 'Pod');
    const policy = find(manifests, 'NetworkPolicy');
    for (const rule of policy.spec.ingress as Manifest[]) {
      const admitted = (rule.from as Manifest[]).some(
        (peer) =>
          Object.entries(peer.podSelector?.matchLabels ?? {}).every(
            ([k, v]) => pod.metadata.labels[k] === v,
          ) &&
          peer.podSelector !== undefined &&
          peer.namespaceSelector === undefined,
      );
      assert.ok(admitted, `port ${rule.ports[0].port}: the test pod is not admitted`);
    }
    assert.equal(findAll(await rendered({ ...values, tests: { enabled: false } }), 'Pod').length, 0);
  });

  test('the rendered test script passes against a running Tollgate and fails when the proxy path does', async () => {
    const manifests = await rendered(values);
    const pod = find(manifests, 'Pod');
    const script = pod.spec.containers[0].args[0] as string;
    assert.deepEqual(pod.spec.containers[0].command, ['/nodejs/bin/node', '--input-type=module', '-e']);

    const upstream = await startUpstream();
    const work = await mkdtemp(join(dir, 'helm-test-'));
    await writeFile(join(work, 'masterkey'), 'helm-test-masterkey\n');
    const tollgate = await startTollgate({
      main: { masterkey_file: join(work, 'masterkey'), access_log: false },
      upstreams: {
        upstreams: {
          'app.example': {
            paths: { '/private': { servers: [upstream.address], authorization: { type: 'jwt' } } },
          },
        },
      },
    });
    // Cluster DNS names → the loopback listeners; the Secret mount → the temp dir.
    const services = {
      'tollgate-token:8081': tollgate.apiUrl,
      'tollgate-metrics:9090': tollgate.adminUrl,
      'tollgate:80': tollgate.proxyUrl,
    };
    const hook = join(work, 'cluster-dns.mjs');
    await writeFile(
      hook,
      `import http from 'node:http';
       import { syncBuiltinESMExports } from 'node:module';
       const map = ${JSON.stringify(services)};
       const real = http.request;
       http.request = (url, options, callback) => {
         const u = new URL(url);
         const to = map[u.hostname + ':' + (u.port || '80')];
         if (!to) throw new Error('unexpected host ' + u.host);
         return real(to + u.pathname + u.search, options, callback);
       };
       syncBuiltinESMExports();`,
    );
    const runScript = async (text: string) => {
      try {
        const { stdout } = await run(
          process.execPath,
          ['--import', hook, '--input-type=module', '-e', text],
          { timeout: 30_000 },
        );
        return { code: 0, output: stdout };
      } catch (error) {
        const e = error as { code?: number; stdout?: string; stderr?: string };
        return { code: e.code ?? -1, output: `${e.stdout}${e.stderr}` };
      }
    };
    try {
      const passed = await runScript(script.replaceAll('/etc/tollgate-test/', `${work}/`));
      assert.equal(passed.code, 0, passed.output);
      assert.match(passed.output, /POST \/jwt 200/);
      assert.match(passed.output, /proxy GET \/private\/check 200/);
      const seen = upstream.requests.at(-1);
      assert.equal(seen?.url, '/private/check');
      assert.equal(
        seen?.headers['x-tollgate-subject'],
        'helm-test',
        'the request went through with the minted token',
      );

      // Without the token the proxy answers 401: the same script must fail.
      const noToken = await runScript(script.replaceAll('/etc/tollgate-test/', `${work}/missing/`));
      assert.notEqual(noToken.code, 0);
      assert.match(noToken.output, /proxy GET \/private\/check: unexpected 401/);
    } finally {
      await tollgate.stop();
      await upstream.close();
    }
  });
});
