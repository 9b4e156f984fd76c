import type { ProxyRequest } from '../request/record.ts';
import { type Identity, identityFromClaims } from './allow-rules.ts';
import {
  type Authenticator,
  type AuthOutcome,
  authorizationCredentials,
  subjectHeaderValue,
} from './authenticator.ts';
import { type BrowserLinks, isBrowserNavigation, markQueryTokenResponse } from './browser-links.ts';
import type { RevocationList } from './revocation.ts';
import { matchScope } from './scope.ts';
import type { TokenCheck } from './tokens.ts';

/** Anything that checks a token: Tollgate's own verifier or an external issuer's. */
export type TokenChecker = (token: string) => TokenCheck | Promise<TokenCheck>;

type TokenSource = 'header' | 'query' | 'cookie';

/**
 * JWT from `Authorization: Bearer …`, the token query parameter or the link cookie, in that order of
 * preference. The stage has already taken the parameter and the cookie out of what is forwarded (on
 * every route), so no copy of the token reaches the upstream or the access log, even when refused.
 *
 * After the signature: revocation (401 token_revoked), then scope (403 token_out_of_scope: the token
 * is genuine but not for this host and path).
 */
export function createJwtAuthenticator(deps: {
  /** The checker for this policy's issuers, or null when none can verify (every token refused). */
  checker: () => TokenChecker | null;
  revocations: RevocationList;
  /** The exchange of a link token for a cookie; null when the route turned it off. */
  browserLinks: BrowserLinks | null;
}): Authenticator {
  /**
   * A link cookie this browser already holds that is valid for another subject: a link navigation
   * must not replace it (an attacker's link would otherwise log the victim in as the attacker for
   * that path, login CSRF); the link is then served as by a script, without the exchange.
   */
  const holdsOtherSubject = (
    checker: TokenChecker,
    cookie: string | null | undefined,
    owner: string,
  ): boolean | Promise<boolean> => {
    if (cookie == null || cookie === '') return false;
    const decide = (held: TokenCheck) =>
      held.ok && !deps.revocations.isRevoked(held.jti) && held.owner !== owner;
    const held = checker(cookie);
    return held instanceof Promise ? held.then(decide, () => false) : decide(held);
  };

  const settle = (
    request: ProxyRequest,
    check: TokenCheck,
    token: string,
    source: TokenSource,
    checker: TokenChecker,
    cookie: string | null | undefined,
  ): AuthOutcome | Promise<AuthOutcome> => {
    if (!check.ok) {
      // For the log line only; the answer stays the generic reason (docs/tokens.md).
      if (check.detail !== undefined) request.authDetail = check.detail;
      return check.reason;
    }
    if (deps.revocations.isRevoked(check.jti)) return 'token_revoked';
    const scopeEntry = check.scope === null ? null : matchScope(check.scope, request.host, request.path);
    if (check.scope !== null && scopeEntry === null) return 'token_out_of_scope';
    request.subject = subjectHeaderValue(check.owner);
    if (check.claims !== undefined) request.identity = identityOf(check.owner, check.claims);
    if (source === 'header') request.consumedHeaders.push('authorization');
    if (source === 'query') {
      markQueryTokenResponse(request);
      const links = deps.browserLinks;
      if (links !== null && isBrowserNavigation(request.req)) {
        const exchange = (keep: boolean) => (keep ? null : links.exchange(request, token, check, scopeEntry));
        const keep = holdsOtherSubject(checker, cookie, check.owner);
        return keep instanceof Promise ? keep.then(exchange) : exchange(keep);
      }
    }
    return null;
  };

  return (request, carriers) => {
    const bearer = authorizationCredentials(request.req.headers.authorization, 'bearer');
    let token: string | null = bearer;
    let source: TokenSource = 'header';
    if (token === null && carriers?.fromQuery != null) {
      token = carriers.fromQuery;
      source = 'query';
    }
    if (token === null && carriers?.fromCookie != null) {
      token = carriers.fromCookie;
      source = 'cookie';
    }
    if (token === null || token === '') return 'missing_credentials';
    const checker = deps.checker();
    if (checker === null) return 'token_invalid';
    const check = checker(token);
    const found = token;
    const cookie = carriers?.fromCookie;
    return check instanceof Promise
      ? check.then((c) => settle(request, c, found, source, checker, cookie))
      : settle(request, check, found, source, checker, cookie);
  };
}

/** An external token's identity for the allow rules: `email` and `groups` claims as OpenID names them. */
function identityOf(subject: string, claims: Readonly<Record<string, unknown>>): Identity {
  return identityFromClaims(subject, claims, 'groups');
}
