import { once } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWTHeaderParameters, SignJWT } from 'jose';
import Provider from 'oidc-provider';

/** A person the test provider logs in (chosen by the test before each login). */
export interface TestAccount {
  sub: string;
  email: string;
  /**
   * The `email_verified` claim as the provider sends it (default true): a string is sent as such
   * (providers that send booleans as strings), null leaves the claim out.
   */
  emailVerified?: boolean | string | null;
  groups: string[];
}

export interface TestProviderOptions {
  /** Tollgate's callback URLs this client may use (`http://127.0.0.1:<port>/.tollgate/oidc/callback`). */
  redirectUris: string[];
  /** Where the provider may send the browser after logout. */
  postLogoutRedirectUris?: string[];
  clientId?: string;
  clientSecret?: string;
  /** ID token lifetime in seconds (the session's expiry before a refresh). */
  idTokenSeconds?: number;
  /** Scope claims (email, groups) only from userinfo, not in the ID token, as the spec has it. */
  claimsInUserinfoOnly?: boolean;
  /** Serve HTTPS with this certificate (an issuer `https://127.0.0.1:<port>`), e.g. from a private CA. */
  tls?: { cert: Buffer | string; key: Buffer | string };
}

export interface TestProvider {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** Who the next login logs in as; null refuses the next login (error=access_denied). */
  account: TestAccount | null;
  /** While true the provider answers every request 503 (an outage). */
  down: boolean;
  /** Token endpoint grants that succeeded, by grant type. */
  readonly grants: Record<string, number>;
  provider: Provider;
  /**
   * Signs a JWT with the provider's own signing key: `claims` as given (iss, aud, exp filled in when
   * absent: the issuer, client_id, an hour), `header` beside alg and kid (a `typ`, say).
   */
  sign(claims: Record<string, unknown>, header?: Partial<JWTHeaderParameters>): Promise<string>;
  close(): Promise<void>;
}

/**
 * A real OpenID provider (panva's oidc-provider, the certified one) on loopback, for tests: one
 * confidential client, PKCE, refresh tokens, and an interaction step that logs in `account` without
 * a form (the test decides who logs in, the protocol is untouched).
 */
export async function startTestProvider(options: TestProviderOptions): Promise<TestProvider> {
  const server = options.tls ? https.createServer(options.tls) : http.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const issuer = `${options.tls ? 'https' : 'http'}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clientId = options.clientId ?? 'tollgate';
  const clientSecret = options.clientSecret ?? 'test-client-secret-0123456789';
  const accounts = new Map<string, TestAccount>();
  const grants: Record<string, number> = {};

  // Its own signing key for this run (the library's built-in development keys are for demos).
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const signingKey = { ...(await exportJWK(privateKey)), kid: 'test-provider-1', alg: 'RS256', use: 'sig' };
  const provider = new Provider(issuer, {
    jwks: { keys: [signingKey as never] },
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: options.redirectUris,
        post_logout_redirect_uris: options.postLogoutRedirectUris ?? [],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
      },
    ],
    pkce: { required: () => true },
    scopes: ['openid', 'email', 'profile', 'offline_access'],
    claims: options.claimsInUserinfoOnly
      ? { openid: ['sub'], email: ['email', 'email_verified', 'groups'], profile: ['name'] }
      : { openid: ['sub', 'groups'], email: ['email', 'email_verified'], profile: ['name'] },
    // Every claim in the ID token itself, as Keycloak and Dex do with their usual mappers (unless
    // the test wants them from userinfo only).
    conformIdTokenClaims: options.claimsInUserinfoOnly ?? false,
    findAccount: async (_ctx, id) => {
      const account = accounts.get(id);
      if (account === undefined) return undefined;
      return {
        accountId: id,
        claims: async () => ({
          sub: account.sub,
          email: account.email,
          ...(account.emailVerified === null ? {} : { email_verified: account.emailVerified ?? true }),
          groups: account.groups,
        }),
      };
    },
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    // Single-use refresh tokens: a second refresh with the same one fails, as with many providers.
    rotateRefreshToken: () => true,
    ttl: {
      IdToken: options.idTokenSeconds ?? 3600,
      AccessToken: options.idTokenSeconds ?? 3600,
      RefreshToken: 86_400,
      Interaction: 600,
      Session: 86_400,
      Grant: 86_400,
    },
    cookies: { keys: ['oidc-provider-test-cookie-key'] },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    features: { devInteractions: { enabled: false }, rpInitiatedLogout: { enabled: true } },
  });
  provider.on('grant.success', (ctx) => {
    const type = String(ctx.oidc.params?.grant_type ?? 'unknown');
    grants[type] = (grants[type] ?? 0) + 1;
  });
  const handle = provider.callback();

  const state: TestProvider = {
    issuer,
    clientId,
    clientSecret,
    account: null,
    down: false,
    grants,
    provider,
    sign: (claims, header = {}) =>
      new SignJWT({ iss: issuer, aud: clientId, ...claims })
        .setProtectedHeader({ ...header, alg: 'RS256', kid: signingKey.kid })
        .setIssuedAt()
        .setExpirationTime(typeof claims.exp === 'number' ? claims.exp : '1h')
        .sign(privateKey),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };

  server.on('request', async (req, res) => {
    if (state.down) {
      res.writeHead(503, { 'content-type': 'text/plain' });
      res.end('down for maintenance');
      return;
    }
    if (!req.url?.startsWith('/interaction/')) {
      handle(req, res);
      return;
    }
    try {
      const details = await provider.interactionDetails(req, res);
      if (details.prompt.name === 'login') {
        const account = state.account;
        if (account === null) {
          await provider.interactionFinished(
            req,
            res,
            { error: 'access_denied', error_description: 'the person declined' },
            { mergeWithLastSubmission: false },
          );
          return;
        }
        accounts.set(account.sub, account);
        await provider.interactionFinished(
          req,
          res,
          { login: { accountId: account.sub } },
          { mergeWithLastSubmission: false },
        );
        return;
      }
      const grant = new provider.Grant({
        accountId: details.session?.accountId as string,
        clientId: details.params.client_id as string,
      });
      grant.addOIDCScope(String(details.params.scope));
      const grantId = await grant.save();
      await provider.interactionFinished(
        req,
        res,
        { consent: { grantId } },
        { mergeWithLastSubmission: true },
      );
    } catch (error) {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(error));
    }
  });
  return state;
}
