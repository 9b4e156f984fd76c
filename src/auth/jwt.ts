import type { ProxyRequest } from '../proxy/context.ts';
import {
  type Authenticator,
  type AuthFailureReason,
  authorizationCredentials,
  subjectHeaderValue,
} from './authenticator.ts';
import { takeQueryParam } from './query.ts';
import type { TokenCheck, TokenVerifier } from './tokens.ts';

/**
 * JWT from `Authorization: Bearer …` or the token query parameter. The parameter is stripped from the
 * forwarded query before anything else, even when the token is refused, so no copy of it reaches the
 * upstream or the access log. A Bearer header wins over the parameter when both are sent.
 */
export function createJwtAuthenticator(deps: {
  tokenParam: string;
  /** The verifier for the current masterkey, or null when none is configured (every token refused). */
  verifier: () => TokenVerifier | null;
}): Authenticator {
  const settle = (
    request: ProxyRequest,
    check: TokenCheck,
    fromHeader: boolean,
  ): AuthFailureReason | null => {
    if (!check.ok) return check.reason;
    request.subject = subjectHeaderValue(check.owner);
    if (fromHeader) request.consumedHeaders.push('authorization');
    return null;
  };

  return (request) => {
    const fromQuery = takeQueryParam(request.query, deps.tokenParam);
    request.forwardQuery = fromQuery.rest;
    const bearer = authorizationCredentials(request.req.headers.authorization, 'bearer');
    const token = bearer ?? fromQuery.value;
    if (token === null || token === '') return 'missing_credentials';
    const verifier = deps.verifier();
    if (verifier === null) return 'token_invalid';
    const check = verifier.check(token);
    const fromHeader = bearer !== null;
    return check instanceof Promise
      ? check.then((c) => settle(request, c, fromHeader))
      : settle(request, check, fromHeader);
  };
}
