/**
 * Takes a parameter out of a raw query string (without `?`), leaving every other byte of it as the
 * client sent it. The value of the first occurrence of exactly `name` is returned, percent-decoded.
 *
 * Removed: every parameter that any upstream framework could read as the token parameter, not only
 * the exact name: a percent-encoded name (`tollgate%74oken`), another letter case (`TOLLGATETOKEN`,
 * for case-insensitive parsers) and array/hash forms (`tollgatetoken[]`, `tollgatetoken[0]`, as PHP
 * and Rack read them), and any of these after a `;` inside a parameter (`a=1;tollgatetoken=T`: servers
 * that split queries on `;` as well as `&` read it as its own parameter). None of those is accepted as
 * a token, but none reaches the upstream or the access log either. A name is read as frameworks
 * read it: `+` is a space, and spaces (plain or encoded) around it are dropped (`%20tollgatetoken`,
 * `tollgatetoken%20`: PHP strips leading spaces), so these are the parameter itself, token included.
 */
export function takeQueryParam(query: string, name: string): { value: string | null; rest: string } {
  if (query === '') return { value: null, rest: query };
  const lowerName = name.toLowerCase();
  const lowerQuery = query.toLowerCase();
  if (!lowerQuery.includes(lowerName) && !query.includes('%')) return { value: null, rest: query };
  // value is null when the exact name is absent; an undecodable value comes back as ''.
  const parts = query.split('&');
  const kept: string[] = [];
  let value: string | null = null;
  let found = false;
  for (let part of parts) {
    if (part.includes(';')) {
      const matrix = withoutMatrixToken(part, name, lowerName);
      if (matrix !== part) {
        found = true;
        part = matrix;
        if (part === '') continue;
      }
    }
    const equals = part.indexOf('=');
    const decodedName = parameterName(equals === -1 ? part : part.slice(0, equals));
    if (decodedName === name) {
      if (value === null) value = safeDecode(equals === -1 ? '' : part.slice(equals + 1)) ?? '';
      found = true;
    } else if (decodedName !== null && isVariantOf(decodedName, lowerName)) {
      found = true;
    } else {
      kept.push(part);
    }
  }
  return found ? { value, rest: kept.join('&') } : { value: null, rest: query };
}

/**
 * A `&`-separated part with every `;`-separated piece after the first that names the parameter (in
 * any spelling) taken out; the first piece stays for the caller to judge. The part itself when none.
 */
function withoutMatrixToken(part: string, name: string, lowerName: string): string {
  const pieces = part.split(';');
  const kept = [pieces[0] as string];
  for (let i = 1; i < pieces.length; i++) {
    const piece = pieces[i] as string;
    const equals = piece.indexOf('=');
    const decodedName = parameterName(equals === -1 ? piece : piece.slice(0, equals));
    if (decodedName === name || (decodedName !== null && isVariantOf(decodedName, lowerName))) continue;
    kept.push(piece);
  }
  return kept.length === pieces.length ? part : kept.join(';');
}

/** `name` in another case, or followed by a bracketed suffix (`name[]`, `name[x]`). */
function isVariantOf(candidate: string, lowerName: string): boolean {
  if (candidate.length < lowerName.length) return false;
  const lower = candidate.toLowerCase();
  if (!lower.startsWith(lowerName)) return false;
  return lower.length === lowerName.length || lower.charCodeAt(lowerName.length) === 0x5b; // '['
}

/** A parameter's name as an application reads it: `+` as space, decoded, spaces around it dropped. */
function parameterName(rawName: string): string | null {
  const spaced = rawName.indexOf('+') === -1 ? rawName : rawName.replaceAll('+', ' ');
  const decoded = spaced.indexOf('%') === -1 ? spaced : safeDecode(spaced);
  if (decoded === null || decoded === '') return decoded;
  // trim() only when an end may be whitespace (controls, space, or beyond ASCII: NBSP and others).
  const first = decoded.charCodeAt(0);
  const last = decoded.charCodeAt(decoded.length - 1);
  return first <= 0x20 || last <= 0x20 || first >= 0x80 || last >= 0x80 ? decoded.trim() : decoded;
}

/**
 * A query as it may be recorded (access log, spans; docs/observability.md): without the token
 * parameter, and on Tollgate's login paths (the OpenID callback) without `code` and `state` either,
 * in every spelling the token parameter is recognised in.
 */
export function recordableQuery(query: string, path: string, tokenParam: string): string {
  const rest = takeQueryParam(query, tokenParam).rest;
  if (!path.startsWith(LOGIN_PATHS) || rest === '') return rest;
  return takeQueryParam(takeQueryParam(rest, 'code').rest, 'state').rest;
}

/** Tollgate's own OpenID endpoints (auth/oidc): their query carries the login's code and state. */
const LOGIN_PATHS = '/.tollgate/oidc/';

function safeDecode(text: string): string | null {
  if (!text.includes('%')) return text;
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}
