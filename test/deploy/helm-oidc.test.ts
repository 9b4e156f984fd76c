/**
 * OpenID Connect with the Helm chart: `oidc.*` values become main.yaml's oidc_providers,
 * session_secret_file and session_max_age_seconds, with the session and client secrets projected
 * from the user's Secrets beside main.yaml; what the chart refuses. `tollgate validate` on the
 * rendered files is in rendered-config.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import {
  CHART,
  configVolume,
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
import { OIDC_VALUES } from './oidc-values.ts';
import { assertPodContract } from './pod-contract.ts';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tollgate-helm-oidc-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

let files = 0;
async function valuesFile(values: object): Promise<string> {
  const file = join(dir, `values-${files++}.yaml`);
  await writeFile(file, stringify(values));
  return file;
}
async function render(values: object) {
  return helm([
    'template',
    'tollgate',
    CHART,
    '--namespace',
    'edge',
    '--kube-version',
    KUBE_VERSION,
    '-f',
    await valuesFile(values),
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
}
const podSpec = (manifests: Manifest[]) => find(manifests, 'Deployment').spec.template.spec;
const mainYaml = (manifests: Manifest[]) =>
  parseYaml(mountedFile(manifests, podSpec(manifests), 'main.yaml'));

const withSso = (extra: object) => ({
  masterkey: { existingSecret: 'edge-masterkey' },
  oidc: {
    sessionSecret: { existingSecret: 'edge-oidc-session' },
    providers: { corp: { ...OIDC_VALUES.oidc.providers.corp, ...extra } },
  },
});

describe('helm: OpenID Connect', () => {
  test('providers become oidc_providers with client_secret_file beside main.yaml', async () => {
    const manifests = await rendered(OIDC_VALUES);
    await validateAll(manifests);
    const main = mainYaml(manifests);
    assert.deepEqual(main.oidc_providers, {
      corp: {
        issuer: 'https://login.example.com/realms/corp',
        client_id: 'tollgate',
        client_secret_file: 'oidc-corp-client-secret',
        scopes: ['openid', 'email', 'profile', 'offline_access'],
        groups_claim: 'roles',
        subject_claim: 'email',
        pass_access_token: true,
        redirect_url: 'https://auth.example.com/.tollgate/oidc/callback',
      },
      'google.workspace': {
        issuer: 'https://accounts.google.com',
        client_id: 'g-client',
        client_secret_file: 'oidc-google.workspace-client-secret',
      },
    });
    assert.equal(main.session_secret_file, 'session-secrets');
    assert.equal(main.session_max_age_seconds, 3600);
  });

  test('the session and client secrets are projected read-only from the named Secrets, nothing created', async () => {
    const manifests = await rendered(OIDC_VALUES);
    const spec = podSpec(manifests);
    const secretSources = (configVolume(spec).projected.sources as Manifest[])
      .filter((s) => s.secret)
      .map((s) => s.secret);
    for (const expected of [
      { name: 'edge-oidc-session', items: [{ key: 'secrets', path: 'session-secrets', mode: 0o440 }] },
      {
        name: 'edge-oidc-corp',
        items: [{ key: 'client-secret', path: 'oidc-corp-client-secret', mode: 0o440 }],
      },
      {
        name: 'edge-oidc-google',
        items: [{ key: 'secret', path: 'oidc-google.workspace-client-secret', mode: 0o440 }],
      },
    ]) {
      assert.deepEqual(
        secretSources.find((s) => s.name === expected.name),
        expected,
        `${expected.name} projected`,
      );
    }
    const mount = spec.containers[0].volumeMounts.find((m: Manifest) => m.mountPath === '/etc/tollgate');
    assert.equal(mount.readOnly, true);
    // The pod contract also checks every *_secret_file of main.yaml against these sources.
    assertPodContract(manifests, spec, 'oidc');
    assert.deepEqual(findAll(manifests, 'Secret'), [], 'the chart creates no Secret for OIDC');
    // main.yaml names files, never secret values; nothing about a Secret's content is in a ConfigMap.
    const configMapText = findAll(manifests, 'ConfigMap')
      .map((c) => Object.values(objectData(c)).join('\n'))
      .join('\n');
    assert.equal(configMapText.includes('edge-oidc-'), false);
  });

  test('the SSO keys: require_verified_email, cookie_domain, post_logout_redirect_url, and a private CA from a ConfigMap', async () => {
    const values = structuredClone(OIDC_VALUES) as typeof OIDC_VALUES & {
      oidc: { providers: { corp: Record<string, unknown> } };
    };
    Object.assign(values.oidc.providers.corp, {
      requireVerifiedEmail: true,
      cookieDomain: '.corp.example.com',
      postLogoutRedirectUrl: 'https://portal.corp.example.com/bye',
      caCertificate: { configMap: 'corp-idp-ca' },
    });
    const manifests = await rendered(values);
    await validateAll(manifests);
    const corp = mainYaml(manifests).oidc_providers.corp;
    assert.equal(corp.require_verified_email, true);
    assert.equal(corp.cookie_domain, '.corp.example.com');
    assert.equal(corp.post_logout_redirect_url, 'https://portal.corp.example.com/bye');
    assert.equal(corp.ca_file, 'oidc-corp-ca.crt');
    // The CA lands where ca_file names it, beside main.yaml, from the user's ConfigMap.
    const sources = configVolume(podSpec(manifests)).projected.sources as Manifest[];
    assert.deepEqual(sources.find((s) => s.configMap?.name === 'corp-idp-ca')?.configMap, {
      name: 'corp-idp-ca',
      items: [{ key: 'ca.crt', path: 'oidc-corp-ca.crt' }],
    });
    // The other provider names no CA and gets none.
    assert.equal(mainYaml(manifests).oidc_providers['google.workspace'].ca_file, undefined);
    await refused(
      withSso({ cookieDomain: 'not a domain' }),
      /oidc\.providers\.corp\.cookieDomain: Does not match pattern/,
    );
    await refused(withSso({ caCertificate: { key: 'ca.pem' } }), /caCertificate: configMap is required/);
  });

  test('a changed provider rolls the pods (main.yaml checksum)', async () => {
    const checksum = async (values: object) =>
      find(await rendered(values), 'Deployment').spec.template.metadata.annotations['checksum/main-config'];
    const changed = structuredClone(OIDC_VALUES);
    changed.oidc.providers.corp.clientId = 'tollgate-2';
    assert.notEqual(await checksum(OIDC_VALUES), await checksum(changed));
  });

  test('without providers main.yaml has no OIDC key and nothing more is mounted', async () => {
    const manifests = await rendered({
      masterkey: { existingSecret: 'edge-masterkey' },
      oidc: { sessionSecret: { existingSecret: 'edge-oidc-session' } },
      config: { sessionMaxAgeSeconds: 600 },
    });
    const main = mainYaml(manifests);
    for (const key of ['oidc_providers', 'session_secret_file', 'session_max_age_seconds']) {
      assert.equal(main[key], undefined, key);
    }
    const names = (configVolume(podSpec(manifests)).projected.sources as Manifest[])
      .map((s) => (s.secret ?? s.configMap).name)
      .sort();
    assert.deepEqual(names, ['edge-masterkey', 'tollgate', 'tollgate-upstreams']);
  });

  test('helm lint --strict passes with providers', async () => {
    const result = await helm(['lint', CHART, '--strict', '-f', await valuesFile(OIDC_VALUES)]);
    assert.ok(result.ok, `helm lint failed:\n${result.stdout}\n${result.stderr}`);
    assert.match(result.stdout, /0 chart\(s\) failed/);
  });
});

describe('helm: OpenID Connect refusals', () => {
  const provider = OIDC_VALUES.oidc.providers.corp;
  const withProvider = (corp: object, sessionSecret: object = { existingSecret: 'edge-oidc-session' }) => ({
    masterkey: { existingSecret: 'edge-masterkey' },
    oidc: { sessionSecret, providers: { corp } },
  });
  const without = (key: string) => Object.fromEntries(Object.entries(provider).filter(([k]) => k !== key));

  test('a provider without issuer, clientId or clientSecret.existingSecret', async () => {
    await refused(withProvider(without('issuer')), /oidc\.providers\.corp: issuer is required/);
    await refused(withProvider(without('clientId')), /oidc\.providers\.corp: clientId is required/);
    await refused(withProvider(without('clientSecret')), /oidc\.providers\.corp: clientSecret is required/);
    await refused(
      withProvider({ ...provider, clientSecret: { key: 'client-secret' } }),
      /oidc\.providers\.corp\.clientSecret: existingSecret is required/,
    );
  });

  test('providers without a session secret: the chart never makes one up', async () => {
    for (const sessionSecret of [{}, { existingSecret: '' }]) {
      await refused(
        withProvider(provider, sessionSecret),
        /oidc\.providers needs oidc\.sessionSecret\.existingSecret: a Secret holding the session secrets .* that every replica shares/,
      );
    }
  });

  test('a misspelt provider key, a bad name, scopes without openid, a foreign redirect path', async () => {
    await refused(
      withProvider({ ...provider, clientID: 'x' }),
      /oidc\.providers\.corp: Additional property clientID is not allowed/,
    );
    await refused(
      {
        masterkey: { existingSecret: 'edge-masterkey' },
        oidc: { sessionSecret: { existingSecret: 's' }, providers: { 'corp/x': provider } },
      },
      /Property name of "corp\/x" does not match/,
    );
    await refused(withProvider({ ...provider, scopes: ['email'] }), /oidc\.providers\.corp\.scopes/);
    await refused(
      withProvider({ ...provider, redirectUrl: 'https://auth.example.com/callback' }),
      /oidc\.providers\.corp\.redirectUrl: Does not match pattern/,
    );
    await refused(
      { masterkey: { existingSecret: 'm' }, config: { sessionMaxAgeSeconds: 10 } },
      /config\.sessionMaxAgeSeconds: Must be greater than or equal to 60/,
    );
  });

  for (const [key, hint] of [
    ['oidc_providers', 'oidc.providers'],
    ['session_secret_file', 'oidc.sessionSecret.existingSecret'],
    ['session_max_age_seconds', 'config.sessionMaxAgeSeconds'],
  ] as Array<[string, string]>) {
    test(`config.extra.${key} is refused, pointing at ${hint}`, async () => {
      await refused(
        { masterkey: { existingSecret: 'm' }, config: { extra: { [key]: 'x' } } },
        new RegExp(
          `config\\.extra\\.${key} is not allowed: the chart sets it; use ${hint.replaceAll('.', '\\.')}`,
        ),
      );
    });
  }
});
