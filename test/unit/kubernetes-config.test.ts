import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseMainConfig, parseUpstreamsConfig } from '../../src/config/load.ts';
import { compileRoutingTable } from '../../src/routing/compile.ts';
import { describeKubernetesUse, serviceRefs, usesKubernetes } from '../../src/sources/kubernetes/use.ts';
import { problems, valid, yaml } from '../fixtures/config/problems.ts';
import { MAIN_JS } from '../helpers/tollgate.ts';

const upstreams = (text: string) => parseUpstreamsConfig(text, 'upstreams.yaml');
const main = (text: string) => parseMainConfig(text, '/etc/tollgate/main.yaml');

const TWO_SERVICES = yaml`
  provider: kubernetes
  upstreams:
    shop.test:
      paths:
        /: { service: "storefront:http" }
        /api: { service: "orders.backend:8080" }
        /static: { servers: ["10.0.0.9:80"] }
`;

describe('service: paths and provider: kubernetes', () => {
  it('a path names a Service by name, namespace and port, or lists servers', () => {
    const config = valid(upstreams(TWO_SERVICES));
    assert.equal(config.provider, 'kubernetes');
    const paths = config.hosts[0]?.paths ?? [];
    assert.deepEqual(
      paths.map((p) => [p.prefix, p.service, p.servers.length]),
      [
        ['/', { name: 'storefront', namespace: null, port: 'http' }, 0],
        ['/api', { name: 'orders', namespace: 'backend', port: 8080 }, 0],
        ['/static', null, 1],
      ],
    );
    assert.deepEqual(
      serviceRefs(config).map((r) => r.name),
      ['storefront', 'orders'],
    );
  });

  it('compile fills a service path from the endpoint lookup, and leaves it empty without one', () => {
    const config = valid(upstreams(TWO_SERVICES));
    const table = compileRoutingTable(config, (ref) =>
      ref.name === 'storefront' ? [{ raw: '10.1.0.1:8080', host: '10.1.0.1', port: 8080 }] : [],
    );
    const root = table.match('shop.test', '/');
    assert.deepEqual(
      root?.servers.map((s) => s.address),
      ['10.1.0.1:8080'],
    );
    assert.equal(root?.service, 'storefront:http');
    assert.deepEqual(table.match('shop.test', '/api')?.servers, []);
    assert.equal(table.match('shop.test', '/static')?.service, null);
    assert.deepEqual(compileRoutingTable(config).match('shop.test', '/')?.servers, []);
  });

  it('each mistake is named with file:line:col and path', () => {
    assert.deepEqual(
      problems(
        upstreams(yaml`
          provider: kubernetes
          upstreams:
            a.test:
              paths:
                /both: { servers: ["10.0.0.1:80"], service: "web:80" }
                /none: { to_https: true }
                /bad: { service: "Web.x.y:http" }
                /port: { service: "web:99999" }
                /noport: { service: "web" }
                /type: { service: 80 }
        `),
      ),
      [
        "upstreams.yaml:5:42: upstreams.a.test.paths./both.service: a path takes 'servers' or 'service', not both",
        "upstreams.yaml:6:7: upstreams.a.test.paths./none: missing 'servers' or 'service'",
        "upstreams.yaml:7:24: upstreams.a.test.paths./bad.service: 'Web' is not a Service name (lower-case letters, digits and '-', starting with a letter, at most 63)",
        'upstreams.yaml:8:25: upstreams.a.test.paths./port.service: port 99999 is out of range 1-65535',
        `upstreams.yaml:9:27: upstreams.a.test.paths./noport.service: 'web' has no port: write "<service>[.<namespace>]:<port or port name>"`,
        'upstreams.yaml:10:25: upstreams.a.test.paths./type.service: expected a string, got a number (quote the value if it is meant as text)',
      ],
    );
  });

  it("service: needs provider: kubernetes; 'consul' is refused with what to use instead", () => {
    assert.deepEqual(
      problems(upstreams('upstreams:\n  a.test:\n    paths:\n      /: { service: "web:80" }\n')),
      [
        "upstreams.yaml:4:21: upstreams.a.test.paths./.service: 'service' needs 'provider: kubernetes' at the top of upstreams.yaml",
      ],
    );
    const consul = problems(
      upstreams(
        `provider: consul\n${'upstreams:\n  a.test:\n    paths:\n      /: { servers: ["10.0.0.1:80"] }\n'}`,
      ),
    );
    assert.equal(consul.length, 1);
    assert.match(
      consul[0] as string,
      /^upstreams\.yaml:1:11: provider: 'consul' is not supported: use 'kubernetes'/,
    );
  });
});

describe('main.yaml kubernetes:', () => {
  it('reads kubeconfig (resolved beside main.yaml), namespace and upstreams_configmap', () => {
    const config = valid(
      main(
        'kubernetes:\n  kubeconfig: kube/config\n  namespace: apps\n  upstreams_configmap: tollgate-upstreams\n',
      ),
    );
    assert.deepEqual(config.kubernetes, {
      kubeconfig: '/etc/tollgate/kube/config',
      namespace: 'apps',
      upstreamsConfigMap: 'tollgate-upstreams',
      ingressClass: null,
      gatewayClass: null,
      gatewayNames: null,
      watchNamespaces: null,
      publishService: null,
      publishAddress: null,
    });
    assert.equal(valid(main('log_level: info\n')).kubernetes, undefined);
    assert.deepEqual(valid(main('kubernetes: {}\n')).kubernetes, {
      kubeconfig: null,
      namespace: null,
      upstreamsConfigMap: null,
      ingressClass: null,
      gatewayClass: null,
      gatewayNames: null,
      watchNamespaces: null,
      publishService: null,
      publishAddress: null,
    });
  });

  it('reads the Ingress controller settings, with file:line problems', () => {
    const config = valid(
      main(
        'kubernetes:\n  ingress_class: tollgate\n  watch_namespaces: [apps, web]\n  publish_service: tollgate/tollgate\n',
      ),
    );
    assert.equal(config.kubernetes?.ingressClass, 'tollgate');
    assert.deepEqual(config.kubernetes?.watchNamespaces, ['apps', 'web']);
    assert.deepEqual(config.kubernetes?.publishService, { namespace: 'tollgate', name: 'tollgate' });
    assert.deepEqual(
      valid(main('kubernetes:\n  publish_address: [203.0.113.7, lb.example.com]\n')).kubernetes
        ?.publishAddress,
      ['203.0.113.7', 'lb.example.com'],
    );
    assert.deepEqual(
      problems(
        main(
          'kubernetes:\n  ingress_class: Tollgate\n  watch_namespaces: [apps, apps, Bad]\n  publish_service: tollgate\n  publish_address: []\n',
        ),
      ),
      [
        "/etc/tollgate/main.yaml:2:18: kubernetes.ingress_class: 'Tollgate' is not an IngressClass name (lower-case letters, digits, - and ., at most 253)",
        "/etc/tollgate/main.yaml:3:28: kubernetes.watch_namespaces[1]: 'apps' is listed twice",
        "/etc/tollgate/main.yaml:3:34: kubernetes.watch_namespaces[2]: 'Bad' is not a namespace name",
        "/etc/tollgate/main.yaml:4:20: kubernetes.publish_service: 'tollgate' is not a Service written 'namespace/name'",
        '/etc/tollgate/main.yaml:5:3: kubernetes.publish_address: set publish_service or publish_address, not both',
        '/etc/tollgate/main.yaml:5:20: kubernetes.publish_address: must list at least one entry (leave the key out for the default)',
      ],
    );
  });

  it('reads gateway_class (docs/gateway-api.md), with file:line problems', () => {
    assert.equal(
      valid(main('kubernetes:\n  gateway_class: tollgate\n')).kubernetes?.gatewayClass,
      'tollgate',
    );
    assert.deepEqual(problems(main('kubernetes:\n  gateway_class: Tollgate_GW\n')), [
      "/etc/tollgate/main.yaml:2:18: kubernetes.gateway_class: 'Tollgate_GW' is not a GatewayClass name (lower-case letters, digits, - and ., at most 253)",
    ]);
  });

  it('reads gateway_names (namespace/name), only beside gateway_class', () => {
    assert.deepEqual(
      valid(main('kubernetes:\n  gateway_class: tollgate\n  gateway_names: [infra/edge, apps/web.gw]\n'))
        .kubernetes?.gatewayNames,
      ['infra/edge', 'apps/web.gw'],
    );
    assert.equal(valid(main('kubernetes:\n  gateway_class: tollgate\n')).kubernetes?.gatewayNames, null);
    assert.deepEqual(
      problems(main('kubernetes:\n  gateway_class: tollgate\n  gateway_names: [edge, a/b/c, Infra/x]\n')),
      [
        "/etc/tollgate/main.yaml:3:19: kubernetes.gateway_names[0]: 'edge' is not namespace/name of a Gateway",
        "/etc/tollgate/main.yaml:3:25: kubernetes.gateway_names[1]: 'a/b/c' is not namespace/name of a Gateway",
        "/etc/tollgate/main.yaml:3:32: kubernetes.gateway_names[2]: 'Infra/x' is not namespace/name of a Gateway",
      ],
    );
    assert.deepEqual(problems(main('kubernetes:\n  gateway_names: [infra/edge]\n')), [
      '/etc/tollgate/main.yaml:2:3: kubernetes.gateway_names: needs gateway_class: it narrows the Gateways of that class',
    ]);
  });

  it('refuses unknown keys and malformed names', () => {
    assert.deepEqual(
      problems(main('kubernetes:\n  namespase: apps\n  upstreams_configmap: Tollgate_Upstreams\n')),
      [
        "/etc/tollgate/main.yaml:2:3: kubernetes.namespase: unknown key 'namespase' (did you mean 'namespace'?)",
        "/etc/tollgate/main.yaml:3:24: kubernetes.upstreams_configmap: 'Tollgate_Upstreams' is not a ConfigMap name (lower-case letters, digits, - and ., at most 253)",
      ],
    );
  });

  it('the provider is used for provider: kubernetes or a ConfigMap, not otherwise', () => {
    const file = valid(
      upstreams('upstreams:\n  a.test:\n    paths:\n      /: { servers: ["10.0.0.1:80"] }\n'),
    );
    const plain = valid(main('log_level: info\n'));
    const withMap = valid(main('kubernetes: { upstreams_configmap: tollgate }\n'));
    assert.equal(usesKubernetes(plain, file), false);
    assert.equal(usesKubernetes(withMap, file), true);
    assert.equal(usesKubernetes(plain, valid(upstreams(TWO_SERVICES))), true);
    assert.deepEqual(describeKubernetesUse(plain, file), []);
  });
});

describe('tollgate validate with service: paths', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tollgate-k8s-validate-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('checks offline and says which Services and ConfigMap a start would watch', async () => {
    // validate reads the kubeconfig as start would (config/file-checks), but never contacts the API
    // server it names: nothing listens at this one.
    await writeFile(
      join(dir, 'kubeconfig'),
      'clusters: [{name: c, cluster: {server: "https://192.0.2.1:6443"}}]\n' +
        'contexts: [{name: x, context: {cluster: c, user: u}}]\n' +
        'users: [{name: u, user: {token: t}}]\ncurrent-context: x\n',
    );
    await writeFile(
      join(dir, 'main.yaml'),
      'kubernetes:\n  kubeconfig: kubeconfig\n  namespace: apps\n  upstreams_configmap: tollgate-upstreams\n',
    );
    await writeFile(join(dir, 'upstreams.yaml'), TWO_SERVICES);
    const result = spawnSync(process.execPath, [MAIN_JS, 'validate', '--config', join(dir, 'main.yaml')], {
      encoding: 'utf8',
      env: { ...process.env, TOLLGATE_CONFIG: '' },
      timeout: 15_000,
    });
    assert.equal(result.status, 0, result.stderr);
    assert.equal(
      result.stdout.split('\n').slice(1).join('\n'),
      [
        "would watch EndpointSlices of Service storefront in apps, port named 'http'",
        'would watch EndpointSlices of Service orders in backend, port 8080',
        'would watch ConfigMap tollgate-upstreams in apps for upstreams.yaml',
        '',
      ].join('\n'),
    );
  });
});
