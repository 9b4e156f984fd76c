import type { ProxyRequest } from '../proxy/context.ts';

/**
 * Why a request was refused; each is an error code in src/errors.ts. All answer 401 except
 * `auth_overloaded` (503): the credential could not be checked now, which says nothing about it.
 */
export type AuthFailureReason =
  | 'missing_credentials'
  | 'invalid_credentials'
  | 'token_expired'
  | 'token_invalid'
  | 'auth_overloaded';

/**
 * Checks one request's credentials against one policy. On success it records the subject and the
 * credentials it consumed on the request and returns null; on failure it returns the reason and
 * leaves answering to the auth stage. Synchronous whenever it can be (plain compares, cache hits).
 */
export type Authenticator = (
  request: ProxyRequest,
) => AuthFailureReason | null | Promise<AuthFailureReason | null>;

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

const HEADER_SAFE = /^[\x20-\x7e]*$/;

/**
 * The X-Tollgate-Subject value for a subject: as is when it is printable ASCII, else percent-encoded
 * (UTF-8), since Node refuses other characters in header values.
 */
export function subjectHeaderValue(subject: string): string {
  return HEADER_SAFE.test(subject) ? subject : encodeURIComponent(subject);
}
