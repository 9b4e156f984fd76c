import { createHash } from 'node:crypto';
import type {
  AuthMethod,
  AuthorizationConfig,
  ClientCertificateAuth,
  ExtAuthzSettings,
  ExternalIssuer,
  ForwardAuthSettings,
  JwtSettings,
  MainConfig,
} from '../config/types.ts';
import type { Logger } from '../log.ts';
import { createApiKeyAuthenticator } from './apikey.ts';
import type { Authenticator, AuthFailureReason } from './authenticator.ts';
import { createBasicAuthenticator } from './basic.ts';
import { createBrowserLinks } from './browser-links.ts';
import { createClientCertificateAuthenticator } from './client-certificate.ts';
import { type Clock, systemClock } from './clock.ts';
import { createExtAuthzMethod } from './ext-authz/method.ts';
import { createForwardMethod } from './forward.ts';
import { createExternalChecker, createIssuerDispatch, invalidBecause } from './issuers.ts';
import { createFileKeySet, createRemoteKeySet, type KeySet } from './jwks.ts';
import { createJwtAuthenticator, type TokenChecker } from './jwt.ts';
import { createOidcMethod } from './oidc/method.ts';
import { createRevocationList, type RevocationList } from './revocation.ts';
import { createTokenVerifier, INVALID, TOKEN_ISSUER, type TokenVerifier } from './tokens.ts';

/** A jwt policy without settings: Tollgate's own tokens, links exchanged for a cookie. */
const DEFAULT_JWT: JwtSettings = Object.freeze({ acceptTollgate: true, external: [], browserLinks: true });

/** Everything the auth stage needs to know about one `authorization.type`. */
export interface AuthMethodSupport {
  /** Builds the checker for one policy; called once per policy object (so once per reload). */
  create(policy: AuthorizationConfig): Authenticator;
  /** The `WWW-Authenticate` challenge sent with a refusal by this method. */
  challenge(reason: AuthFailureReason): string;
}

export interface AuthMethodDeps {
  /** main.yaml `token_param`; also the name of the cookie a browser link is exchanged for. */
  tokenParam: string;
  /** The current masterkey (it may change on reload), or null when none is configured. */
  masterkey: () => string | null;
  logger: Logger;
  /** Token clock; the system clock by default. */
  now?: Clock | undefined;
  /** Revoked token ids (revoked_tokens_file); none when absent. */
  revocations?: RevocationList | undefined;
  /** main.yaml, for its oidc_providers and session settings; without it oidc routes answer 503. */
  main?: MainConfig;
}

/** The methods, and what releases what they hold (the forward-auth connection pools). */
export interface AuthMethods {
  readonly methods: Readonly<Record<AuthMethod, AuthMethodSupport>>;
  close(): Promise<void>;
}

/**
 * The authentication methods, one entry per `AuthMethod` (docs/authentication.md): a Record, so a
 * method added to the config types without its authenticator and challenge here does not compile.
 */
export function createAuthMethods(deps: AuthMethodDeps): AuthMethods {
  const forward = createForwardMethod({ logger: deps.logger });
  const extAuthz = createExtAuthzMethod({ logger: deps.logger });
  const oidc = deps.main?.oidcProviders
    ? createOidcMethod({ main: deps.main, logger: deps.logger, now: deps.now ?? systemClock })
    : null;
  const methods: Record<AuthMethod, AuthMethodSupport> = {
    basic: {
      create: createBasicMethod(),
      challenge: () => 'Basic realm="tollgate", charset="UTF-8"',
    },
    apikey: {
      create: (policy) => createApiKeyAuthenticator(policy),
      challenge: () => 'ApiKey realm="tollgate", header="x-api-key"',
    },
    jwt: {
      create: createJwtMethod(deps),
      // RFC 6750 §3.1: no error code when no token was sent.
      challenge: (reason) =>
        reason === 'missing_credentials'
          ? 'Bearer realm="tollgate"'
          : reason === 'token_out_of_scope'
            ? 'Bearer realm="tollgate", error="insufficient_scope"'
            : 'Bearer realm="tollgate", error="invalid_token"',
    },
    forward: {
      // validate-auth always sets `forward` for this type.
      create: (policy) => forward.create(policy.forward as ForwardAuthSettings),
      // The auth service speaks for itself (its answer is relayed); Tollgate's own 503 has no challenge.
      challenge: () => '',
    },
    oidc: {
      // No oidc_providers: validation refuses such a policy; one arriving anyway closes its route.
      create: (policy) => (oidc === null ? () => 'auth_unavailable' : oidc.create(policy)),
      // A script or machine client is told to bring a Bearer token (browsers are sent to log in).
      challenge: (reason) =>
        reason === 'token_invalid' || reason === 'token_expired'
          ? 'Bearer realm="tollgate", error="invalid_token"'
          : 'Bearer realm="tollgate"',
    },
    client_certificate: {
      // validate-auth always sets `clientCertificate` for this type.
      create: (policy) =>
        createClientCertificateAuthenticator(policy.clientCertificate as ClientCertificateAuth),
      // No HTTP scheme asks for a certificate: the TLS handshake does.
      challenge: () => '',
    },
    ext_authz: {
      // validate-auth always sets `extAuthz` for this type.
      create: (policy) => extAuthz.create(policy.extAuthz as ExtAuthzSettings),
      // The service speaks for itself (its denied response is relayed); Tollgate's own 503 has no challenge.
      challenge: () => '',
    },
  };
  return {
    methods,
    close: () => {
      oidc?.close();
      extAuthz.close();
      return forward.close();
    },
  };
}

/** Distinct basic policies whose authenticators (caches, queues) are kept for reuse. */
const KEPT_BASIC_POLICIES = 64;

/**
 * basic policies: one authenticator per distinct user list, so a routing-table rebuild (a reload, an
 * EndpointSlice change: new policy objects with the same content) keeps the verified credentials and
 * the queue of password checks instead of starting cold, which under load sends every request back
 * to scrypt at once. The key is a digest of the users (in memory only, never logged).
 */
function createBasicMethod(): (policy: AuthorizationConfig) => Authenticator {
  const kept = new Map<string, Authenticator>();
  return (policy) => {
    const key = createHash('sha256').update(JSON.stringify(policy.users)).digest('base64');
    let authenticator = kept.get(key);
    if (authenticator === undefined) {
      authenticator = createBasicAuthenticator(policy);
      if (kept.size >= KEPT_BASIC_POLICIES) kept.delete(kept.keys().next().value as string);
    } else {
      kept.delete(key);
    }
    kept.set(key, authenticator);
    return authenticator;
  };
}

/**
 * jwt policies: Tollgate's own tokens (masterkey) and/or external issuers (JWKS), revocation, and
 * browser links. What outlives one policy is shared here: one verifier (one key, one cache) for
 * Tollgate's tokens, and the remote key sets (a reload must not refetch every issuer's keys).
 */
function createJwtMethod(deps: AuthMethodDeps): (policy: AuthorizationConfig) => Authenticator {
  const now = deps.now ?? systemClock;
  const revocations = deps.revocations ?? createRevocationList();
  // The link cookie is named after the query parameter it replaces.
  const browserLinks = createBrowserLinks({ cookieName: deps.tokenParam, now });
  let verifier: TokenVerifier | null = null;
  const currentVerifier = (): TokenVerifier | null => {
    const masterkey = deps.masterkey();
    if (masterkey === null) return null;
    if (verifier?.masterkey !== masterkey) verifier = createTokenVerifier(masterkey, { now });
    return verifier;
  };
  const tollgateChecker: TokenChecker = (token) => currentVerifier()?.check(token) ?? INVALID;
  const remoteKeySets = new Map<string, KeySet>();

  const keysFor = (issuer: ExternalIssuer): KeySet | null => {
    if (issuer.jwksUri !== null) {
      let keys = remoteKeySets.get(issuer.jwksUri);
      if (keys === undefined) {
        keys = createRemoteKeySet(issuer.jwksUri, { issuer: issuer.issuer, logger: deps.logger });
        remoteKeySets.set(issuer.jwksUri, keys);
      }
      return keys;
    }
    try {
      return createFileKeySet(issuer.jwksFile as string);
    } catch (error) {
      // Fails closed: this issuer's tokens are refused until a reload brings a readable key set.
      deps.logger.error(
        {
          event: 'jwks_file_unreadable',
          issuer: issuer.issuer,
          file: issuer.jwksFile,
          err: (error as Error).message,
        },
        'cannot read the key set file; tokens of this issuer are refused',
      );
      return null;
    }
  };

  return (policy) => {
    const settings = policy.jwt ?? DEFAULT_JWT;
    const checkers = new Map<string, TokenChecker>();
    if (settings.acceptTollgate) checkers.set(TOKEN_ISSUER, tollgateChecker);
    for (const issuer of settings.external) {
      const keys = keysFor(issuer);
      checkers.set(
        issuer.issuer,
        keys === null
          ? () => invalidBecause('keys_unavailable')
          : createExternalChecker(issuer, keys, { now }),
      );
    }
    const checker = createIssuerDispatch(checkers);
    const onlyTollgate = checkers.size === 1 && settings.acceptTollgate;
    return createJwtAuthenticator({
      // No masterkey: Tollgate tokens cannot be verified; say so with the cheap refusal.
      checker: () => (onlyTollgate && currentVerifier() === null ? null : checker),
      revocations,
      browserLinks: settings.browserLinks ? browserLinks : null,
    });
  };
}
