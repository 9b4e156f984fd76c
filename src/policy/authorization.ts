import { isPasswordHash } from '../auth/password.ts';
import { closestKey } from '../config/suggest.ts';
import type { AllowRules, AuthMethod, AuthorizationConfig, BasicUser, NamedApiKey } from '../config/types.ts';
import { readAllowRules } from './allow.ts';
import { CLIENT_CERTIFICATE_KEYS, readClientCertificateAuth } from './client-certificate.ts';
import type { PolicyContext } from './context.ts';
import { EXT_AUTHZ_KEYS, readExtAuthzSettings } from './ext-authz.ts';
import { FORWARD_KEYS, readForwardSettings } from './forward.ts';
import { ISSUER_KEYS, readJwtSettings } from './jwt.ts';
import type { PlainField as Field, PlainReader } from './plain-reader.ts';
import { readSecretCredentials } from './secret-credentials.ts';

/**
 * The one reader of an `authorization` object (docs/authentication.md), whichever source wrote it:
 * upstreams.yaml (config/validate-auth attaches file positions), a TollgatePolicy's
 * `spec.authorization` and an Ingress's auth annotations (translated into this shape first).
 * `data` is read as `creds`, `api` as `apikey`, and `creds` folded into `users` / `keys` so consumers
 * read one list. Secrets never appear in messages.
 *
 * An `authorization:` with no value is an error rather than "no auth": when the author meant to
 * protect something, failing to start is the safe outcome.
 */

/** Keys that only make sense with type jwt (see jwt.ts). */
const JWT_ONLY_KEYS = ['issuers', 'browser_links', ...ISSUER_KEYS] as const;
const AUTH_KEYS = [
  'type',
  'creds',
  'data',
  'users',
  'keys',
  'provider',
  'allow',
  ...JWT_ONLY_KEYS,
  ...FORWARD_KEYS,
  ...CLIENT_CERTIFICATE_KEYS,
  ...EXT_AUTHZ_KEYS,
] as const;
/**
 * A Kubernetes object's keys besides: credentials by Secret reference (`basic.secretRef`,
 * `apikey.secretRef`) and the challenge's realm (an Ingress `auth-realm`).
 */
const KUBERNETES_KEYS = ['realm', 'basic', 'apikey'] as const;
/** Inline credentials: a Kubernetes object names a Secret instead. */
const INLINE_CREDENTIALS = ['creds', 'data', 'users', 'keys'] as const;
const USER_KEYS = ['username', 'password', 'password_hash'] as const;
const API_KEY_KEYS = ['name', 'key'] as const;

/** `api` is another spelling of `apikey`, as configs written for Aralez use it (docs/configuration.md). */
const METHODS: Readonly<Record<string, AuthMethod>> = {
  basic: 'basic',
  apikey: 'apikey',
  api: 'apikey',
  jwt: 'jwt',
  forward: 'forward',
  oidc: 'oidc',
  client_certificate: 'client_certificate',
  ext_authz: 'ext_authz',
};

/** The name an apikey `creds` key gets, since consumers only read `keys`. */
const SINGLE_KEY_NAME = 'apikey';

/** A realm goes into a quoted-string: printable ASCII without quote or backslash. */
const REALM = /^[\x20-\x21\x23-\x5b\x5d-\x7e]{1,64}$/;

/** Why `value` cannot be a challenge realm, or null: the one realm check. */
export function realmProblem(value: string): string | null {
  return REALM.test(value) ? null : 'must be 1-64 printable characters without " or \\';
}

/**
 * Reads `field` (an `authorization` value) for `context`'s source; null (after reporting) when it
 * cannot be used. A caller treats any issue in `r` as failure, not only null.
 */
export function readAuthorization(
  r: PlainReader,
  field: Field,
  context: PolicyContext,
): AuthorizationConfig | null {
  if (r.isNull(field.node)) {
    r.report(
      field.keyNode,
      field.path,
      'is empty: give it a type, or remove the key to turn authentication off',
    );
    return null;
  }
  const kubernetes = context.kubernetes !== undefined;
  const fields = r.fields(
    field.node,
    field.path,
    kubernetes ? [...AUTH_KEYS, ...KUBERNETES_KEYS] : AUTH_KEYS,
  );
  if (fields === null) return null;

  const type = readMethod(r, field, fields.get('type'));
  if (kubernetes)
    for (const key of INLINE_CREDENTIALS) {
      const inline = fields.get(key);
      if (inline)
        r.report(
          inline.keyNode,
          inline.path,
          "credentials are read from a Secret here: use 'basic' or 'apikey' with a secretRef",
        );
    }
  const creds = kubernetes ? undefined : readCreds(r, fields);
  const usersField = kubernetes ? undefined : fields.get('users');
  const keysField = kubernetes ? undefined : fields.get('keys');
  if (type === undefined) return null;
  const realm = readRealm(r, fields);
  const extras = readExtras(r, field, fields, type, context);
  if (extras === null || realm === null) return null;
  const common = { ...realm, ...extras };
  if (kubernetes)
    for (const method of ['basic', 'apikey'] as const) {
      const entry = fields.get(method);
      if (entry && type !== method) r.report(entry.keyNode, entry.path, `'${method}' is for type ${method}`);
    }
  if (type !== 'ext_authz') {
    for (const key of EXT_AUTHZ_KEYS) {
      const extra = fields.get(key);
      if (extra) r.report(extra.keyNode, extra.path, `'${key}' is for type ext_authz`);
    }
  } else {
    notUsed(r, fields, type, context);
    const extAuthz = readExtAuthzSettings(r, field, fields, context);
    return extAuthz === null ? null : { type, users: [], keys: [], extAuthz, ...common };
  }
  if (type !== 'client_certificate') {
    for (const key of CLIENT_CERTIFICATE_KEYS) {
      const extra = fields.get(key);
      if (extra) r.report(extra.keyNode, extra.path, `'${key}' is for type client_certificate`);
    }
  } else {
    notUsed(r, fields, type, context);
    const clientCertificate = readClientCertificateAuth(r, fields);
    return clientCertificate === null ? null : { type, users: [], keys: [], clientCertificate, ...common };
  }
  if (type === 'oidc') {
    notUsed(r, fields, type, context);
    return { type, users: [], keys: [], ...common };
  }
  if (type !== 'forward') {
    for (const key of FORWARD_KEYS) {
      const extra = fields.get(key);
      if (extra) r.report(extra.keyNode, extra.path, `'${key}' is for type forward`);
    }
  }

  if (type === 'forward') {
    for (const key of [...JWT_ONLY_KEYS, 'users', 'keys']) {
      const extra = fields.get(key);
      if (extra && !(kubernetes && (key === 'users' || key === 'keys')))
        r.report(extra.keyNode, extra.path, `'${key}' is not used by type forward`);
    }
    const forward = readForwardSettings(r, field, fields, creds, context);
    return forward === null ? null : { type, users: [], keys: [], forward, ...common };
  }

  if (type === 'jwt') {
    if (creds)
      r.report(creds.keyNode, creds.path, 'jwt takes no creds: tokens are verified with the masterkey');
    for (const extra of [usersField, keysField]) {
      if (extra)
        r.report(
          extra.keyNode,
          extra.path,
          `jwt takes no ${extra.key}: tokens are verified with the masterkey`,
        );
    }
    const jwt = readJwtSettings(r, fields, context);
    // The defaults are left implicit, so a plain `type: jwt` reads the same as before these keys.
    const isDefault = jwt.acceptTollgate && jwt.external.length === 0 && jwt.browserLinks;
    return isDefault
      ? { type, users: [], keys: [], ...common }
      : { type, users: [], keys: [], jwt, ...common };
  }
  for (const key of JWT_ONLY_KEYS) {
    const extra = fields.get(key);
    if (extra) r.report(extra.keyNode, extra.path, `'${key}' is for type jwt`);
  }
  if (kubernetes) {
    const fromSecret = readSecretCredentials(r, field, fields, type, context);
    if (fromSecret === null) return null;
    return { type, users: fromSecret.users, keys: fromSecret.keys, ...common };
  }
  if (type === 'basic') {
    if (keysField)
      r.report(keysField.keyNode, keysField.path, "'keys' is for type apikey; basic uses 'users'");
    const users = readBasicUsers(r, creds, usersField);
    if (creds === undefined && r.isAbsentOrEmpty(usersField)) {
      r.report(field.keyNode, field.path, "basic needs creds 'user:password' or a 'users' list");
    }
    return { type, users, keys: [], ...common };
  }
  if (usersField)
    r.report(usersField.keyNode, usersField.path, "'users' is for type basic; apikey uses 'keys'");
  const keys = readApiKeys(r, creds, keysField);
  if (creds === undefined && r.isAbsentOrEmpty(keysField)) {
    r.report(field.keyNode, field.path, "apikey needs creds (the key) or a 'keys' list");
  }
  return { type, users: [], keys, ...common };
}

/** The keys no method but basic, apikey, jwt and forward takes, refused for `type`. */
function notUsed(r: PlainReader, fields: Map<string, Field>, type: AuthMethod, context: PolicyContext): void {
  // A Kubernetes object's inline credentials were refused already.
  const inline = context.kubernetes === undefined ? INLINE_CREDENTIALS : [];
  for (const key of [...JWT_ONLY_KEYS, ...FORWARD_KEYS, ...inline]) {
    const extra = fields.get(key);
    if (extra) r.report(extra.keyNode, extra.path, `'${key}' is not used by type ${type}`);
  }
}

function readMethod(r: PlainReader, parent: Field, field: Field | undefined): AuthMethod | undefined {
  if (field === undefined || r.isNull(field.node)) {
    r.report(
      parent.keyNode,
      parent.path,
      "missing 'type' (basic, apikey, api, jwt, forward, oidc, client_certificate or ext_authz)",
    );
    return undefined;
  }
  const name = r.string(field);
  if (name === undefined) return undefined;
  const method = Object.hasOwn(METHODS, name) ? METHODS[name] : undefined;
  if (method === undefined) {
    const guess = closestKey(name, Object.keys(METHODS));
    const hint =
      guess !== undefined
        ? `did you mean '${guess}'?`
        : 'expected basic, apikey, api, jwt, forward, oidc, client_certificate or ext_authz';
    r.report(r.at(field), field.path, `unknown authorization type '${name}' (${hint})`);
  }
  return method;
}

/** `realm` (Kubernetes sources): null after reporting. */
function readRealm(r: PlainReader, fields: Map<string, Field>): { realm?: string } | null {
  const field = r.given(fields, 'realm');
  if (field === undefined) return {};
  const value = r.string(field);
  if (value === undefined) return null;
  const problem = realmProblem(value);
  if (problem === null) return { realm: value };
  r.report(r.at(field), field.path, problem);
  return null;
}

/**
 * `allow` (any method) and `provider` (oidc). The provider name is checked against main.yaml's
 * `oidc_providers` here when the context knows them (Kubernetes sources), else after both files are
 * read (config/validate-oidc checkOidcReferences, at the line config/validate-auth records).
 */
function readExtras(
  r: PlainReader,
  parent: Field,
  fields: Map<string, Field>,
  type: AuthMethod,
  context: PolicyContext,
): { allow?: AllowRules; oidc?: { provider: string } } | null {
  const extras: { allow?: AllowRules; oidc?: { provider: string } } = {};
  const providerField = fields.get('provider');
  if (type === 'oidc') {
    if (providerField === undefined || r.isNull(providerField.node)) {
      r.report(parent.keyNode, parent.path, "oidc needs 'provider': a name from main.yaml oidc_providers");
      return null;
    }
    const provider = r.string(providerField);
    if (provider === undefined) return null;
    const known = context.oidcProviders;
    if (known !== undefined && !known.includes(provider)) {
      r.report(r.at(providerField), providerField.path, unknownProviderMessage(provider, known));
      return null;
    }
    extras.oidc = { provider };
  } else if (providerField) {
    r.report(providerField.keyNode, providerField.path, "'provider' is for type oidc");
  }
  const allowField = fields.get('allow');
  if (allowField && !r.isNull(allowField.node)) {
    const allow = readAllowRules(r, allowField, type);
    if (allow === null) return null;
    extras.allow = allow;
  }
  return extras;
}

/** The message for an oidc policy naming a provider main.yaml does not define. */
export function unknownProviderMessage(name: string, known: readonly string[]): string {
  return `unknown OpenID provider '${name}' (${known.length === 0 ? 'main.yaml has no oidc_providers' : `main.yaml defines ${known.join(', ')}`})`;
}

/** `creds`, or its alias `data`; both at once is ambiguous and refused. */
function readCreds(r: PlainReader, fields: Map<string, Field>): Field | undefined {
  const creds = fields.get('creds');
  const data = fields.get('data');
  if (creds && data) {
    r.report(
      data.keyNode,
      data.path,
      "'creds' and 'data' are both set; 'data' is an alias of 'creds', keep one",
    );
  }
  const chosen = creds ?? data;
  return chosen && !r.isNull(chosen.node) ? chosen : undefined;
}

function readBasicUsers(
  r: PlainReader,
  creds: Field | undefined,
  usersField: Field | undefined,
): BasicUser[] {
  const users: BasicUser[] = [];
  const seen = new Set<string>();
  const add = (user: BasicUser, at: { path: string }, node: Parameters<PlainReader['report']>[0]) => {
    if (seen.has(user.username)) {
      r.report(node, at.path, `user '${user.username}' is defined twice`);
      return;
    }
    seen.add(user.username);
    users.push(user);
  };

  if (creds) {
    const text = r.string(creds);
    if (text !== undefined) {
      const colon = text.indexOf(':');
      // The message describes the shape only: the value is a password.
      if (colon === -1) r.report(r.at(creds), creds.path, "must be 'user:password'");
      else if (colon === 0)
        r.report(r.at(creds), creds.path, "must be 'user:password' with a non-empty user");
      else if (colon === text.length - 1) r.report(r.at(creds), creds.path, 'the password must not be empty');
      else {
        add(
          { username: text.slice(0, colon), password: text.slice(colon + 1), passwordHash: null },
          creds,
          r.at(creds),
        );
      }
    }
  }

  if (usersField && !r.isNull(usersField.node)) {
    for (const item of r.items(usersField, 'a list of {username, password | password_hash}') ?? []) {
      const fields = r.fields(item.node, item.path, USER_KEYS);
      if (fields === null) continue;
      const usernameField = fields.get('username');
      const passwordField = fields.get('password');
      const hashField = fields.get('password_hash');
      let username: string | undefined;
      if (usernameField === undefined) r.report(item.node, item.path, "missing 'username'");
      else {
        username = r.string(usernameField);
        if (username?.includes(':')) {
          r.report(
            r.at(usernameField),
            usernameField.path,
            "must not contain ':' (Basic auth cannot carry it)",
          );
          username = undefined;
        }
      }
      let password: string | null = null;
      let passwordHash: string | null = null;
      if (passwordField && hashField) {
        r.report(hashField.keyNode, hashField.path, "set either 'password' or 'password_hash', not both");
      } else if (passwordField) {
        password = r.string(passwordField) ?? null;
      } else if (hashField) {
        passwordHash = r.string(hashField) ?? null;
        // The full format check (not just the prefix): a malformed hash would otherwise load fine and
        // lock that user out silently.
        if (passwordHash !== null && !isPasswordHash(passwordHash)) {
          r.report(
            r.at(hashField),
            hashField.path,
            "must be a hash from 'tollgate hash-password' (scrypt$...)",
          );
          passwordHash = null;
        }
      } else {
        r.report(item.node, item.path, "missing 'password' or 'password_hash'");
      }
      if (username !== undefined && (password !== null || passwordHash !== null)) {
        add(
          { username, password, passwordHash },
          usernameField ?? item,
          usernameField ? r.at(usernameField) : item.node,
        );
      }
    }
  }
  return users;
}

function readApiKeys(r: PlainReader, creds: Field | undefined, keysField: Field | undefined): NamedApiKey[] {
  const keys: NamedApiKey[] = [];
  const names = new Set<string>();
  const values = new Set<string>();
  const add = (entry: NamedApiKey, path: string, node: Parameters<PlainReader['report']>[0]) => {
    if (names.has(entry.name)) r.report(node, path, `key name '${entry.name}' is used twice`);
    // A repeated key would make the subject sent upstream ambiguous; the value itself stays secret.
    else if (values.has(entry.key))
      r.report(node, path, 'this key is the same as another key of this policy');
    else {
      names.add(entry.name);
      values.add(entry.key);
      keys.push(entry);
    }
  };

  if (creds) {
    const key = r.string(creds);
    if (key !== undefined) add({ name: SINGLE_KEY_NAME, key }, creds.path, r.at(creds));
  }

  if (keysField && !r.isNull(keysField.node)) {
    for (const item of r.items(keysField, 'a list of {name, key}') ?? []) {
      const fields = r.fields(item.node, item.path, API_KEY_KEYS);
      if (fields === null) continue;
      const nameField = fields.get('name');
      const keyField = fields.get('key');
      if (nameField === undefined) r.report(item.node, item.path, "missing 'name'");
      if (keyField === undefined) r.report(item.node, item.path, "missing 'key'");
      const name = nameField ? r.string(nameField) : undefined;
      const key = keyField ? r.string(keyField) : undefined;
      if (name !== undefined && key !== undefined) add({ name, key }, item.path, item.node);
    }
  }
  return keys;
}
