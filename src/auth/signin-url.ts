/**
 * `signin_url` (upstreams.yaml) and `auth-signin` (Ingress) as ingress-nginx and oauth2-proxy write
 * them: a URL that may name `$scheme`, `$host`, `$request_uri` and `$escaped_request_uri`
 * (docs/authentication.md#forward-auth). The template is checked once, at validation; it is expanded
 * for each 401 turned into a sign-in redirect. Every value is escaped for where it goes, so nothing a
 * client sends can add a header, a line or another URL component to the `Location`.
 */

export const SIGNIN_VARIABLES = ['scheme', 'host', 'request_uri', 'escaped_request_uri'] as const;
type SigninVariable = (typeof SIGNIN_VARIABLES)[number];

/** `$name` (nginx's spelling; `${name}` too): the name is what a variable may be called. */
const VARIABLE = /\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))?/g;

/** What the variables stand for in one request. */
export interface SigninRequest {
  secure: boolean;
  /** The routed, normalised host (lower case, no port, IPv6 without brackets). */
  host: string;
  /** The Host header as received (validated, port kept): the host of `rd`, as before variables existed. */
  rawHost: string;
  /** Path (normalised) and query as forwarded, credentials removed. */
  requestUri: string;
}

/**
 * The variables a template uses, or why it cannot be one: an unknown `$variable` (named), or a `$`
 * that starts none.
 */
export function checkSigninTemplate(
  text: string,
): { ok: true; variables: string[] } | { ok: false; message: string } {
  const variables: string[] = [];
  for (const match of text.matchAll(VARIABLE)) {
    const name = match[1] ?? match[2];
    if (name === undefined) return { ok: false, message: "has a '$' that starts no variable name" };
    if (!(SIGNIN_VARIABLES as readonly string[]).includes(name))
      return {
        ok: false,
        message: `uses the variable $${name}, which Tollgate does not know (known: ${SIGNIN_VARIABLES.map((known) => `$${known}`).join(', ')})`,
      };
    variables.push(name);
  }
  return { ok: true, variables };
}

/**
 * The template with sample values, for validation to check the result is a URL (the expanded
 * value at request time has the same shape: only the sample values differ).
 */
export function sampleSigninUrl(template: string): string {
  return expandSigninUrl(template, {
    secure: true,
    host: 'example.com',
    rawHost: 'example.com',
    requestUri: '/sample?a=b',
  });
}

/** Whether the template itself already passes `rd` (then Tollgate does not add a second one). */
export function hasRedirectParameter(template: string): boolean {
  const query = template.indexOf('?');
  if (query === -1) return false;
  return template
    .slice(query + 1)
    .split('&')
    .some((pair) => pair === 'rd' || pair.startsWith('rd='));
}

/**
 * The sign-in Location for one request: the template expanded and, unless it passes `rd` itself,
 * `rd=` the original URL appended (what ingress-nginx does).
 */
export function signinLocation(template: string, request: SigninRequest): string {
  const expanded = expandSigninUrl(template, request);
  if (hasRedirectParameter(template)) return expanded;
  const original = `${schemeOf(request)}://${request.rawHost}${request.requestUri}`;
  return `${expanded}${expanded.includes('?') ? '&' : '?'}rd=${encodeURIComponent(original)}`;
}

function expandSigninUrl(template: string, request: SigninRequest): string {
  if (!template.includes('$')) return template;
  return template.replace(VARIABLE, (whole, braced: string | undefined, plain: string | undefined) => {
    const name = (braced ?? plain) as SigninVariable | undefined;
    switch (name) {
      case 'scheme':
        return schemeOf(request);
      case 'host':
        return hostOf(request);
      case 'request_uri':
        return uriChars(request.requestUri);
      case 'escaped_request_uri':
        return encodeURIComponent(request.requestUri);
      default:
        // Validation refused any other; left as written rather than guessed at.
        return whole;
    }
  });
}

const schemeOf = (request: SigninRequest) => (request.secure ? 'https' : 'http');

/** The normalised host holds only host-name characters; an IPv6 literal gets its brackets. */
const hostOf = (request: SigninRequest) => (request.host.includes(':') ? `[${request.host}]` : request.host);

/**
 * A request URI placed into a URL as it is: anything outside the characters a URI may carry
 * (controls, spaces, quotes, `#`, non-ASCII) is percent-encoded, so the value can neither end the
 * header line nor start a fragment.
 */
function uriChars(uri: string): string {
  return uri.replace(/[^A-Za-z0-9\-._~:/?[\]@!$&'()*+,;=%]/g, (char) =>
    [...Buffer.from(char, 'utf8')]
      .map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`)
      .join(''),
  );
}
