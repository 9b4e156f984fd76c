/**
 * The main.yaml and upstreams.yaml that the chart and the overlays put into /etc/tollgate are
 * accepted by the real binary: `tollgate validate` on a directory laid out like the pod's.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import tls from 'node:tls';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { hasOpenssl, selfSigned } from '../helpers/certs.ts';
import { freePort, MAIN_JS, startTollgate } from '../helpers/tollgate.ts';
import {
  CHART,
  configVolume,
  find,
  helmTemplate,
  ingressWithOidc,
  KUSTOMIZE,
  kustomize,
  type Manifest,
  mountedFile,
  parseYaml,
} from './manifests.ts';
import { OIDC_VALUES } from './oidc-values.ts';

const run = promisify(execFile);

/** Writes what the pod would see in /etc/tollgate and runs `tollgate validate` on it. */
async function validateMounted(
  manifests: Manifest[],
  podSpec: Manifest,
  /** Files of mounted Secrets the config names (validate reads them as start does). */
  secrets: Record<string, string | Buffer> = {},
): Promise<{ code: number; output: string }> {
  assert.ok(existsSync(MAIN_JS), `${MAIN_JS} missing: run npm run build first`);
  const dir = await mkdtemp(join(tmpdir(), 'tollgate-rendered-'));
  try {
    await writeFile(join(dir, 'main.yaml'), mountedFile(manifests, podSpec, 'main.yaml'));
    await writeFile(join(dir, 'upstreams.yaml'), mountedFile(manifests, podSpec, 'upstreams.yaml'));
    await writeFile(join(dir, 'masterkey'), 'a-masterkey-as-a-mounted-secret-would-hold\n');
    for (const [name, content] of Object.entries(secrets)) await writeFile(join(dir, name), content);
    const env = { ...process.env, TOLLGATE_CONFIG: '', TOLLGATE_MASTERKEY: '' };
    try {
      const { stdout, stderr } = await run(
        process.execPath,
        [MAIN_JS, 'validate', '--config', join(dir, 'main.yaml')],
        {
          env,
          timeout: 30_000,
        },
      );
      return { code: 0, output: stdout + stderr };
    } catch (error) {
      const e = error as { code?: number; stdout?: string; stderr?: string };
      return { code: typeof e.code === 'number' ? e.code : -1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Secret name → path in /etc/tollgate, for the config volume's Secret sources named with `prefix`. */
function projectedSecretPaths(podSpec: Manifest, prefix: string): Record<string, string | undefined> {
  const paths: Record<string, string | undefined> = {};
  for (const source of configVolume(podSpec).projected.sources as Manifest[]) {
    if (!source.secret?.name.startsWith(prefix)) continue;
    for (const item of source.secret.items as Manifest[]) paths[source.secret.name] = item.path;
  }
  return paths;
}

/** What those Secrets would hold: a line that is a valid session secret and a valid client secret. */
function secretFiles(paths: Record<string, string | undefined>): Record<string, string> {
  const files: Record<string, string> = {};
  for (const path of Object.values(paths)) {
    if (path !== undefined) files[path] = `${randomBytes(48).toString('base64')}\n`;
  }
  return files;
}

describe('rendered configuration is accepted by tollgate validate', () => {
  test('helm: default values', async () => {
    const manifests = await helmTemplate();
    const result = await validateMounted(manifests, find(manifests, 'Deployment').spec.template.spec);
    assert.equal(result.code, 0, result.output);
  });

  test('helm: kind e2e values', async () => {
    const manifests = await helmTemplate({ valuesFiles: [join(CHART, 'ci', 'kind-values.yaml')] });
    const result = await validateMounted(manifests, find(manifests, 'Deployment').spec.template.spec);
    assert.equal(result.code, 0, result.output);
  });

  test('helm: every main.yaml setting of values.yaml', async () => {
    const manifests = await helmTemplate({
      set: [
        'config.logLevel=debug',
        'config.accessLog=false',
        'config.tokenParam=access_token',
        'config.maxTokenMinutes=60',
        'config.httpsPort=8443',
        'config.trustedProxies[0]=10.0.0.0/8',
        'config.timeouts.upstreamConnectSeconds=2',
        'config.timeouts.upstreamResponseSeconds=30',
        'config.timeouts.keepaliveSeconds=20',
        'config.timeouts.clientHeaderSeconds=10',
        'config.timeouts.clientSendSeconds=45',
        'config.shutdownDelaySeconds=3',
        'config.shutdownGraceSeconds=10',
        'config.rateLimitRedis=redis://redis.default.svc:6379',
      ],
    });
    const result = await validateMounted(manifests, find(manifests, 'Deployment').spec.template.spec);
    assert.equal(result.code, 0, result.output);
  });

  const noOpenssl = hasOpenssl() ? false : 'openssl is needed to make a certificate';
  test('helm: with TLS, the certificate projected beside main.yaml is what the TLS listener serves', {
    skip: noOpenssl,
  }, async () => {
    const manifests = await helmTemplate({ set: ['tls.enabled=true', 'tls.secretName=edge-tls'] });
    const spec = find(manifests, 'Deployment').spec.template.spec;
    const { cert, key, fingerprint256 } = selfSigned('tollgate.test');
    const checked = await validateMounted(manifests, spec, { 'tls.crt': cert, 'tls.key': key });
    assert.equal(checked.code, 0, checked.output);

    // Start it on loopback with the chart's main.yaml (relative tls.crt / tls.key / masterkey paths).
    const chartMain = parseYaml(mountedFile(manifests, spec, 'main.yaml'));
    assert.equal(chartMain.tls_certificate, 'tls.crt');
    // The helper picks free loopback ports for the three plain listeners.
    const { proxy_address_http, config_address, admin_address, ...chartSettings } = chartMain;
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-rendered-tls-'));
    await writeFile(join(dir, 'tls.crt'), cert);
    await writeFile(join(dir, 'tls.key'), key);
    await writeFile(join(dir, 'masterkey'), 'a-masterkey-as-a-mounted-secret-would-hold\n');
    const tlsPort = await freePort();
    const tollgate = await startTollgate({
      dir,
      main: { ...chartSettings, proxy_address_tls: `127.0.0.1:${tlsPort}`, shutdown_delay_seconds: 0 },
      upstreams: mountedFile(manifests, spec, 'upstreams.yaml'),
    });
    try {
      const served = await new Promise<string>((resolve, reject) => {
        const socket = tls.connect(
          { host: '127.0.0.1', port: tlsPort, servername: 'tollgate.test', rejectUnauthorized: false },
          () => {
            resolve(socket.getPeerX509Certificate()?.fingerprint256 ?? '');
            socket.end();
          },
        );
        socket.on('error', reject);
      });
      assert.equal(served, fingerprint256);
    } finally {
      await tollgate.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('helm: a misspelt key in config.extra is refused (validation fails closed)', async () => {
    const manifests = await helmTemplate({ set: ['config.extra.shutdown_grace_secs=5'] });
    const result = await validateMounted(manifests, find(manifests, 'Deployment').spec.template.spec);
    assert.equal(result.code, 1, result.output);
    assert.match(result.output, /shutdown_grace_secs/);
  });

  test('helm: OpenID Connect, its secret files where main.yaml names them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-rendered-oidc-'));
    try {
      // An oidc route under DEFAULT: validate checks the provider exists and has redirect_url.
      const values = {
        ...OIDC_VALUES,
        upstreams: {
          config: {
            provider: 'file',
            upstreams: {
              DEFAULT: {
                paths: {
                  '/': { servers: ['10.0.0.1:80'], authorization: { type: 'oidc', provider: 'corp' } },
                },
              },
            },
          },
        },
      };
      await writeFile(join(dir, 'values.yaml'), stringify(values));
      const manifests = await helmTemplate({ valuesFiles: [join(dir, 'values.yaml')] });
      const spec = find(manifests, 'Deployment').spec.template.spec;
      // One file per item the config volume projects from these Secrets, at the path projected: a
      // main.yaml naming any other path fails validate.
      const paths = projectedSecretPaths(spec, 'edge-oidc-');
      const files = secretFiles(paths);
      const checked = await validateMounted(manifests, spec, files);
      assert.equal(checked.code, 0, checked.output);
      // A short session secret, or a client secret missing, at those paths: both fail.
      const short = await validateMounted(manifests, spec, {
        ...files,
        [paths['edge-oidc-session'] ?? '?']: 'too-short\n',
      });
      assert.equal(short.code, 1, short.output);
      assert.match(short.output, /session_secret_file/);
      const withoutCorp = secretFiles({ ...paths, 'edge-oidc-corp': undefined });
      const missing = await validateMounted(manifests, spec, withoutCorp);
      assert.equal(missing.code, 1, missing.output);
      assert.match(missing.output, /client_secret_file/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('kustomize: ingress overlay with the oidc component', async () => {
    const work = await ingressWithOidc();
    const manifests = await kustomize(work).finally(() => rm(work, { recursive: true, force: true }));
    const deployment = find(manifests, 'Deployment', 'tollgate');
    const spec = deployment.spec.template.spec;
    const paths = projectedSecretPaths(spec, 'tollgate-oidc-');
    assert.deepEqual(Object.keys(paths).sort(), ['tollgate-oidc-corp', 'tollgate-oidc-session']);
    const result = await validateMounted(manifests, spec, secretFiles(paths));
    assert.equal(result.code, 0, result.output);
  });

  for (const overlay of ['ingress', 'sidecar']) {
    test(`kustomize: ${overlay} overlay`, async () => {
      const manifests = await kustomize(join(KUSTOMIZE, 'overlays', overlay));
      const deployment = manifests.find((m) => m.kind === 'Deployment') as Manifest;
      const result = await validateMounted(manifests, deployment.spec.template.spec);
      assert.equal(result.code, 0, result.output);
    });
  }
});
