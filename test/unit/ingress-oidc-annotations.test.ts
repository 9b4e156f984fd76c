import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Ingress, V1IngressClass, V1Service } from '@kubernetes/client-node';
import { type IngressInput, translateIngresses } from '../../src/sources/kubernetes/ingress/translate.ts';
import { ingress, ingressClass, service } from '../helpers/fake-kube-api.ts';

const json = <T>(model: { toJSON(): unknown }) => structuredClone(model.toJSON()) as T;

function input(ingresses: V1Ingress[]): IngressInput {
  const web = json<V1Service>(
    service({ name: 'web', namespace: 'apps', ports: [{ name: 'http', port: 80, targetPort: 8080 }] }),
  );
  return {
    className: 'tollgate',
    classes: [json<V1IngressClass>(ingressClass())],
    ingresses,
    services: new Map([['apps/web', web]]),
    secrets: new Map(),
    base: { hosts: [] },
  };
}

const annotated = (annotations: Record<string, string>) =>
  json<V1Ingress>(
    ingress({
      namespace: 'apps',
      name: 'a',
      annotations,
      rules: [{ host: 'a.test', paths: [{ service: 'web', port: 80 }] }],
    }),
  );

/** tollgate.io/auth-type: oidc and the allow-* annotations (docs/ingress.md#annotations). */
describe('Ingress annotations for OpenID login and allow rules', () => {
  it('auth-type oidc + auth-oidc-provider + allow-* become the path policy', () => {
    const result = translateIngresses(
      input([
        annotated({
          'tollgate.io/auth-type': 'oidc',
          'tollgate.io/auth-oidc-provider': 'corp',
          'tollgate.io/allow-groups': 'admins, sre',
          'tollgate.io/allow-email-domains': 'Example.com',
          'tollgate.io/allow-emails': 'Boss@Example.com',
          'tollgate.io/allow-subjects': 'alice,bob',
        }),
      ]),
    );
    const path = result.hosts[0]?.paths[0];
    assert.equal(path?.unavailable, null);
    assert.deepEqual(path?.authorization?.oidc, { provider: 'corp' });
    assert.deepEqual(path?.authorization?.allow, {
      subjects: ['alice', 'bob'],
      emails: ['boss@example.com'],
      emailDomains: ['example.com'],
      groups: ['admins', 'sre'],
      claims: null,
    });
  });

  it('what cannot be honoured closes the paths (503), never opens them', () => {
    for (const [annotations, message] of [
      [{ 'tollgate.io/auth-type': 'oidc' }, /auth-type oidc needs tollgate.io\/auth-oidc-provider/],
      [
        { 'tollgate.io/auth-type': 'oidc', 'tollgate.io/auth-oidc-provider': 'no way' },
        /not a provider name/,
      ],
      [
        { 'tollgate.io/auth-type': 'jwt', 'tollgate.io/allow-emails': 'a@b.com@evil.com' },
        /is not an email address/,
      ],
      [
        {
          'tollgate.io/auth-type': 'forward',
          'tollgate.io/auth-url': 'http://auth/x',
          'tollgate.io/allow-groups': 'a',
        },
        /knows only the subject/,
      ],
      [{ 'tollgate.io/allow-subjects': 'alice' }, /need an auth-type/],
      [{ 'tollgate.io/auth-type': 'jwt', 'tollgate.io/allow-groups': ' , ' }, /lists nobody/],
    ] as const) {
      const result = translateIngresses(input([annotated(annotations)]));
      const path = result.hosts[0]?.paths[0];
      assert.ok(path?.unavailable, JSON.stringify(annotations));
      assert.match(path.unavailable, message);
    }
  });
});
