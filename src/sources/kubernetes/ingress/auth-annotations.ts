import type { AuthorizationConfig } from '../../../config/types.ts';
import { readAuthorization } from '../../../policy/authorization.ts';
import { PlainReader, type PolicyIssue } from '../../../policy/plain-reader.ts';
import { decodeSecret } from '../secret-data.ts';
import type { IngressSettings } from './annotations.ts';
import type { BuildInput } from './translation-cache.ts';

/**
 * The auth-* annotations of an Ingress (docs/ingress.md#annotations) as the policy they ask for,
 * read by the one policy reader (policy/authorization.ts) as a TollgatePolicy is. Called by one
 * Ingress's build (build.ts).
 */

interface AuthOutcome {
  policy: AuthorizationConfig | null;
  problems: string[];
  warnings: string[];
}

/** The annotation a key of the policy shape comes from, for the Ingress's messages. */
const ANNOTATION_OF: Readonly<Record<string, string>> = {
  type: 'auth-type',
  realm: 'auth-realm',
  url: 'auth-url',
  auth_response_headers: 'auth-response-headers',
  signin_url: 'auth-signin',
  provider: 'tollgate.io/auth-oidc-provider',
};

/**
 * The policy the auth annotations ask for: the annotations in the policy shape (as a TollgatePolicy
 * writes it, the Secret by reference), read by the one policy reader (policy/authorization) with the
 * Ingress's own Secrets, Tollgate's ports and main.yaml's OpenID providers.
 */
export function authorizationOf(
  settings: IngressSettings,
  namespace: string,
  input: Pick<BuildInput, 'secrets' | 'reachesTollgate' | 'oidcProviders'>,
): AuthOutcome {
  const outcome: AuthOutcome = { policy: null, problems: [], warnings: [] };
  const type = settings.authType;
  if (type === undefined) return outcome;
  const shape: Record<string, unknown> = { type };
  if (settings.authRealm !== undefined) shape.realm = settings.authRealm;
  if (type === 'forward') {
    if (settings.authUrl === undefined)
      return { ...outcome, problems: ['auth-type forward needs an auth-url'] };
    shape.url = settings.authUrl;
    if (settings.authResponseHeaders !== undefined)
      shape.auth_response_headers = settings.authResponseHeaders;
    if (settings.authSignin !== undefined) shape.signin_url = settings.authSignin;
  } else if (type === 'oidc') {
    if (settings.authOidcProvider === undefined)
      return { ...outcome, problems: ['auth-type oidc needs tollgate.io/auth-oidc-provider'] };
    shape.provider = settings.authOidcProvider;
  } else if (type === 'basic' || type === 'apikey') {
    if (settings.authSecret === undefined)
      return { ...outcome, problems: [`auth-type ${type} needs an auth-secret`] };
    const [first, second] = settings.authSecret.split('/');
    const secretRef = second === undefined ? { name: first } : { name: second, namespace: first };
    shape[type] =
      type === 'basic' && settings.authSecretType !== undefined
        ? { secretRef, format: settings.authSecretType }
        : { secretRef };
  }
  const r = new PlainReader();
  outcome.policy = readAuthorization(r, r.root('authorization', shape), {
    oidcProviders: input.oidcProviders,
    kubernetes: {
      reachesTollgate: input.reachesTollgate,
      secret: (ref) => {
        // Another namespace's Secret is never read (secretsOf does not even watch it).
        if (ref.namespace !== undefined && ref.namespace !== namespace)
          return {
            problem: `auth-secret ${settings.authSecret} is in another namespace (only the Ingress's own is read)`,
          };
        const key = `${namespace}/${ref.name}`;
        const secret = input.secrets.get(key);
        if (secret === undefined) return { problem: `auth Secret ${key} does not exist` };
        return { data: decodeSecret(secret), name: `auth Secret ${key}` };
      },
    },
  });
  const say = (issue: PolicyIssue) => {
    const key = issue.place.segments[0];
    const annotation = typeof key === 'string' ? ANNOTATION_OF[key] : undefined;
    // Messages about the Secret name it already.
    return annotation === undefined ? issue.message : `${annotation} ${issue.message}`;
  };
  outcome.problems.push(...r.issues.map(say));
  outcome.warnings.push(...r.warnings.map(say));
  if (outcome.problems.length > 0) outcome.policy = null;
  return outcome;
}
