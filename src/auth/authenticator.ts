import type { ProxyRequest } from '../request/record.ts';
import type { TokenCarriers } from './token-carriers.ts';

/**
 * Why a request was refused; each is an error code in src/errors.ts. All answer 401 except
 * `auth_overloaded` and `auth_unavailable` (503): the credential could not be checked now (too many
 * password checks waiting; the forward-auth service did not give a usable answer), which says
 * nothing about it; and `token_out_of_scope` (403): the token is genuine but not for this resource;
 * `forbidden` (403): authenticated, but the policy's allow rules do not name them (never a login loop).
 * `login_required` (401): an oidc route without a session, for a client that is not a browser.
 */
export type AuthFailureReason =
  | 'missing_credentials'
  | 'invalid_credentials'
  | 'token_expired'
  | 'token_invalid'
  | 'auth_overloaded'
  | 'token_revoked'
  | 'token_out_of_scope'
  | 'auth_unavailable'
  | 'login_required'
  | 'client_certificate_required'
  | 'forbidden';

/**
 * An authenticated browser navigation that is answered by the proxy itself instead of forwarded:
 * a 303 to `location` setting `setCookie` (docs/tokens.md#links-in-a-browser).
 */
export interface AuthRedirect {
  readonly redirect: string;
  readonly setCookie: string;
}

/**
 * Another service's refusal, relayed to the client as it was given (forward auth: a 401/403 or the
 * redirect to a login page, docs/authentication.md#forward-auth). `reason` is what metrics and the
 * brute-force guard see: `login_redirect` (a 3xx) is a normal step of a login and is never counted
 * as a failed attempt.
 */
export interface AuthDenial {
  readonly denial: {
    readonly status: number;
    readonly headers: Readonly<Record<string, string | string[]>>;
    readonly body: Buffer;
  };
  readonly reason: AuthFailureReason | 'login_redirect' | OidcFailureReason;
}

/** Why an OpenID callback was refused (docs/observability.md, tollgate_auth_failures_total reasons). */
export type OidcFailureReason =
  | 'access_denied'
  | 'provider_error'
  | 'state_missing'
  | 'state_invalid'
  | 'state_expired'
  | 'state_mismatch'
  | 'code_rejected'
  | 'id_token_invalid';

/**
 * A step of a login answered by Tollgate itself, not a refusal and never counted as one: the 302 to
 * the provider, the 303 back after the callback, the logout's redirect (auth/oidc).
 */
export interface AuthAnswer {
  readonly local: {
    readonly status: number;
    readonly headers: Readonly<Record<string, string | string[]>>;
    readonly body: string;
  };
}

/** null: authenticated, pass on. A reason: refuse. A redirect, a denial or an answer: answer it. */
export type AuthOutcome = AuthFailureReason | AuthRedirect | AuthDenial | AuthAnswer | null;

/**
 * Checks one request's credentials against one policy. On success it records the subject and the
 * credentials it consumed on the request and returns null; on failure it returns the reason and
 * leaves answering to the auth stage. Synchronous whenever it can be (plain compares, cache hits).
 * `carriers` is the token found outside `Authorization` (already removed from what is forwarded).
 */
export type Authenticator = (
  request: ProxyRequest,
  carriers?: TokenCarriers,
) => AuthOutcome | Promise<AuthOutcome>;

/**
 * The credentials of an `Authorization: <scheme> <credentials>` header, or null when the header is
 * absent or uses another scheme. The scheme is case-insensitive (RFC 9110 §11.1).
 */
export function authorizationCredentials(header: string | undefined, scheme: string): string | null {
  if (header === undefined) return null;
  const space = header.indexOf(' ');
  if (space !== scheme.length || header.slice(0, space).toLowerCase() !== scheme) return null;
  return header.slice(space + 1).trim();
}

/** Characters sent as themselves in X-Tollgate-Subject; everything else is percent-encoded. */
const SUBJECT_SAFE = /^[A-Za-z0-9\-._~@:+!$*'()/=]*$/;

/**
 * The X-Tollgate-Subject value for a subject (docs/authentication.md#the-subject-header): the subject
 * itself when it holds only letters, digits and `-._~@:+!$*'()/=`, else encodeURIComponent of it
 * (UTF-8). `%`, space, comma, quotes and anything outside ASCII are therefore always encoded:
 * decodeURIComponent of the value gives back exactly the subject, and no subject can pass for
 * another (`%61dmin` arrives as `%2561dmin`, `alice, admin` as `alice%2C%20admin`).
 */
export function subjectHeaderValue(subject: string): string {
  if (SUBJECT_SAFE.test(subject)) return subject;
  return encodeURIComponent(subject);
}
