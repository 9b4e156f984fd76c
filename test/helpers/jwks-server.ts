import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';

/** A signing key of a test identity provider, with its public JWK (kid and alg set). */
export interface IssuerKey {
  readonly kid: string;
  readonly alg: 'RS256' | 'ES256' | 'EdDSA';
  readonly privateKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
  readonly publicJwk: JWK;
}

export async function issuerKey(kid: string, alg: IssuerKey['alg']): Promise<IssuerKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { kid, alg, privateKey, publicJwk };
}

/** Signs a token as an external identity provider would (claims given are merged over defaults). */
export function signAs(
  key: IssuerKey,
  claims: Record<string, unknown>,
  options: {
    issuer: string;
    audience: string | string[];
    expiresIn?: string | number;
    header?: Record<string, unknown>;
  },
): Promise<string> {
  const jwt = new SignJWT({ sub: 'svc', ...claims })
    .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT', ...options.header })
    .setIssuer(options.issuer)
    .setAudience(options.audience)
    .setIssuedAt()
    .setJti(crypto.randomUUID())
    .setExpirationTime(options.expiresIn ?? '10m');
  return jwt.sign(key.privateKey);
}

/**
 * A JWKS endpoint on loopback, like an OpenID provider's `jwks_uri`: serves whatever key set the
 * test sets, counts fetches per path, and can be taken "down" (connections reset) and back.
 */
export interface JwksServer {
  readonly origin: string;
  /** Fetches seen, per request path. */
  fetches(path: string): number;
  setKeys(path: string, keys: readonly IssuerKey[]): void;
  setDown(down: boolean): void;
  close(): Promise<void>;
}

export async function startJwksServer(): Promise<JwksServer> {
  const sets = new Map<string, JWK[]>();
  const counts = new Map<string, number>();
  let down = false;
  const server = http.createServer((req, res) => {
    const path = req.url ?? '/';
    counts.set(path, (counts.get(path) ?? 0) + 1);
    if (down) {
      req.socket.destroy();
      return;
    }
    const keys = sets.get(path);
    if (keys === undefined) {
      res.writeHead(404).end();
      return;
    }
    const body = JSON.stringify({ keys });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    fetches: (path) => counts.get(path) ?? 0,
    setKeys: (path, keys) =>
      sets.set(
        path,
        keys.map((k) => k.publicJwk),
      ),
    setDown: (value) => {
      down = value;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
