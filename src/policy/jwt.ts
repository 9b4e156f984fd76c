import type { ExternalIssuer, JwtSettings } from '../config/types.ts';
import { authUrlTargetProblem } from './auth-url-guard.ts';
import type { PolicyContext } from './context.ts';
import type { PlainField as Field, PlainItem as Item, PlainReader } from './plain-reader.ts';

/**
 * The jwt-only keys of an `authorization` (docs/tokens.md#external-issuers):
 *
 *   type: jwt                      # Tollgate's own tokens only (the default)
 *   browser_links: false           # no link-for-cookie exchange on these routes (default true)
 *   issuer: https://idp…           # shorthand: ONE external issuer, Tollgate's tokens refused
 *   audience: tollgate             #   (with jwks_uri or jwks_file, subject_claim)
 *   issuers:                       # or a list, where `tollgate` names Tollgate's own tokens
 *     - tollgate
 *     - { issuer: …, audience: …, jwks_uri: … }
 */
export const ISSUER_KEYS = ['issuer', 'audience', 'jwks_uri', 'jwks_file', 'subject_claim'] as const;
/** The name `issuers` uses for Tollgate's own tokens (their `iss`). */
const TOLLGATE = 'tollgate';
const MAX_ISSUERS = 16;

export function readJwtSettings(
  r: PlainReader,
  fields: Map<string, Field>,
  context: PolicyContext,
): JwtSettings {
  const browserLinksField = fields.get('browser_links');
  const browserLinks = browserLinksField ? (r.boolean(browserLinksField) ?? true) : true;
  const issuersField = fields.get('issuers');
  const shorthand = ISSUER_KEYS.map((key) => fields.get(key)).filter((f): f is Field => f !== undefined);

  if (issuersField && shorthand.length > 0) {
    const first = shorthand[0] as Field;
    r.report(
      first.keyNode,
      first.path,
      `'${first.key}' belongs inside an 'issuers' entry when 'issuers' is set`,
    );
    return { acceptTollgate: false, external: [], browserLinks };
  }
  if (shorthand.length > 0) {
    const issuer = readIssuer(r, new Map(shorthand.map((f) => [f.key, f])), shorthand[0] as Field, context);
    return { acceptTollgate: false, external: issuer ? [issuer] : [], browserLinks };
  }
  if (issuersField === undefined) return { acceptTollgate: true, external: [], browserLinks };

  const items = r.items(issuersField, `a list of 1 to ${MAX_ISSUERS} issuers ('tollgate' or a mapping)`);
  if (items === null) return { acceptTollgate: false, external: [], browserLinks };
  if (items.length === 0 || items.length > MAX_ISSUERS) {
    r.report(r.at(issuersField), issuersField.path, `must list 1 to ${MAX_ISSUERS} issuers`);
  }
  let acceptTollgate = false;
  const external: ExternalIssuer[] = [];
  const seen = new Set<string>();
  for (const item of items) {
    if (typeof (item.node as { value?: unknown } | null)?.value === 'string') {
      const name = r.string(item);
      if (name !== TOLLGATE) {
        r.report(
          item.node,
          item.path,
          `'${name}' is not an issuer: write 'tollgate' or a mapping with issuer, audience and jwks_uri or jwks_file`,
        );
      } else if (acceptTollgate) {
        r.report(item.node, item.path, "'tollgate' is listed twice");
      }
      acceptTollgate ||= name === TOLLGATE;
      continue;
    }
    const issuerFields = r.fields(item.node, item.path, ISSUER_KEYS);
    if (issuerFields === null) continue;
    const issuer = readIssuer(
      r,
      issuerFields,
      { key: 'issuers', keyNode: item.node, node: item.node, path: item.path } as Field,
      context,
    );
    if (issuer === null) continue;
    if (seen.has(issuer.issuer)) {
      r.report(item.node, item.path, `issuer '${issuer.issuer}' is listed twice`);
      continue;
    }
    seen.add(issuer.issuer);
    external.push(issuer);
  }
  return { acceptTollgate, external, browserLinks };
}

/** One external issuer; null (after reporting) when it is incomplete or wrong. */
function readIssuer(
  r: PlainReader,
  fields: Map<string, Field>,
  parent: Field | Item,
  context: PolicyContext,
): ExternalIssuer | null {
  const at = (parent as Field).keyNode ?? parent.node;
  let ok = true;
  const need = (key: string): Field | undefined => {
    const field = fields.get(key);
    if (field === undefined) {
      r.report(at, parent.path, `an external issuer needs '${key}'`);
      ok = false;
    }
    return field;
  };
  const issuerField = need('issuer');
  const issuer = issuerField ? r.string(issuerField) : undefined;
  if (issuer === TOLLGATE) {
    r.report(
      r.at(issuerField as Field),
      (issuerField as Field).path,
      "'tollgate' is the issuer of Tollgate's own tokens: list it as the plain string 'tollgate' in issuers",
    );
    ok = false;
  }
  const audienceField = need('audience');
  const audience = audienceField ? readAudience(r, audienceField) : undefined;

  const uriField = fields.get('jwks_uri');
  const fileField = fields.get('jwks_file');
  let jwksUri: string | null = null;
  let jwksFile: string | null = null;
  if ((uriField === undefined) === (fileField === undefined)) {
    r.report(at, parent.path, "an external issuer needs exactly one of 'jwks_uri' and 'jwks_file'");
    ok = false;
  } else if (uriField) {
    jwksUri = readJwksUri(r, uriField, context);
  } else if (fileField) {
    jwksFile = readJwksFileAt(r, fileField, context);
  }
  const claimField = fields.get('subject_claim');
  const subjectClaim = claimField ? r.string(claimField) : 'sub';
  if (!ok || issuer === undefined || audience === undefined || subjectClaim === undefined) return null;
  if (jwksUri === null && jwksFile === null) return null;
  return { issuer, audience, jwksUri, jwksFile, subjectClaim };
}

function readAudience(r: PlainReader, field: Field): string[] | undefined {
  if (Array.isArray(field.node?.value)) {
    const items = r.items(field, 'a string or a list of strings');
    if (items === null) return undefined;
    const values = items.map((item) => r.string(item));
    if (values.length === 0) r.report(r.at(field), field.path, 'must name at least one audience');
    return values.every((v): v is string => v !== undefined) && values.length > 0 ? values : undefined;
  }
  const value = r.string(field);
  return value === undefined ? undefined : [value];
}

/** From a Kubernetes object the key set may not be fetched from Tollgate's pod itself (auth-url-guard.ts). */
function readJwksUri(r: PlainReader, field: Field, context: PolicyContext): string | null {
  const value = r.string(field);
  if (value === undefined) return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    r.report(r.at(field), field.path, `'${value}' is not a URL`);
    return null;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    r.report(r.at(field), field.path, 'must be an https:// (or http://) URL');
    return null;
  }
  if (url.username || url.password) {
    r.report(r.at(field), field.path, 'must not carry credentials');
    return null;
  }
  const target =
    context.kubernetes === undefined
      ? null
      : authUrlTargetProblem(url.href, context.kubernetes.reachesTollgate);
  if (target !== null) {
    r.report(r.at(field), field.path, `${target}: key sets may not be fetched from there`);
    return null;
  }
  return url.href;
}

/**
 * Read now, with the reader start uses, so a missing or malformed key set stops the start (or the
 * reload) with its line. A source without files (a Kubernetes object) may not name one.
 */
function readJwksFileAt(r: PlainReader, field: Field, context: PolicyContext): string | null {
  const value = r.string(field);
  if (value === undefined) return null;
  if (context.files === undefined) {
    r.report(r.at(field), field.path, NOT_A_POD_FILE);
    return null;
  }
  const outcome = context.files.jwks(value);
  if ('problem' in outcome) {
    r.report(r.at(field), field.path, outcome.problem);
    return null;
  }
  return outcome.path;
}

/** Why a Kubernetes object may not name a file (jwks_file, ca_file). */
export const NOT_A_POD_FILE = 'names a file of the Tollgate pod: not in a policy';
