/**
 * A stand-in OpenID issuer for the `tollgate-issuer` target: an RS256 key whose public half is written
 * as a JSON Web Key Set file (the route's `jwks_file`), and one token it signed, reused for every
 * request of the run. A file rather than a JWKS server: with the verified-token cache warm, how the
 * keys arrived makes no difference to the per-request cost, and the bench starts nothing extra.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';

export const BENCH_ISSUER = 'https://issuer.bench.local';
export const BENCH_AUDIENCE = 'tollgate-bench';

export interface BenchIssuer {
  /** Absolute path of the key set file. */
  readonly jwksFile: string;
  /** A token of the issuer, valid for the whole run. */
  readonly token: string;
}

export async function createBenchIssuer(dir: string): Promise<BenchIssuer> {
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'bench-1', alg: 'RS256', use: 'sig' };
  const jwksFile = join(dir, 'issuer-jwks.json');
  writeFileSync(jwksFile, JSON.stringify({ keys: [jwk] }));
  const token = await new SignJWT({ sub: 'bench-service' })
    .setProtectedHeader({ alg: 'RS256', kid: 'bench-1', typ: 'JWT' })
    .setIssuer(BENCH_ISSUER)
    .setAudience(BENCH_AUDIENCE)
    .setIssuedAt()
    .setExpirationTime('2h')
    .sign(privateKey);
  return { jwksFile, token };
}

/** The upstreams.yaml lines of the `/issuer` path (indented for `paths:`). */
export function issuerRouteYaml(server: string, jwksFile: string): string[] {
  return [
    '      "/issuer":',
    `        servers: [${server}]`,
    '        authorization:',
    '          type: jwt',
    `          issuer: "${BENCH_ISSUER}"`,
    `          audience: "${BENCH_AUDIENCE}"`,
    `          jwks_file: "${jwksFile}"`,
  ];
}
