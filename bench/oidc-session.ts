import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createSealer } from '../src/auth/session-cookie.ts';

/**
 * The `tollgate-oidc-session` target's setup (docs/authentication.md#openid-connect): an OpenID
 * provider in main.yaml and a session cookie sealed with the same `session_secret_file`, as a login
 * would have set it. A request with a valid session never talks to the provider (the session is
 * stateless and not due for a refresh), so the provider's issuer is a closed loopback port: what is
 * measured is opening and checking the cookie and writing the identity headers, nothing else.
 */
export interface OidcBenchSetup {
  /** main.yaml lines. */
  mainLines: string[];
  /** The Cookie header of a request with a valid session. */
  cookie: string;
}

export async function createOidcBenchSetup(dir: string): Promise<OidcBenchSetup> {
  const secret = randomBytes(48).toString('base64url');
  writeFileSync(join(dir, 'session-secrets'), `${secret}\n`);
  writeFileSync(join(dir, 'oidc-client-secret'), 'bench-client-secret\n');
  const now = Math.floor(Date.now() / 1000);
  const sealed = await createSealer([Buffer.from(secret)]).seal({
    v: 1,
    p: 'bench',
    sub: 'bench-user',
    em: 'bench-user@example.com',
    gr: ['staff', 'bench'],
    cl: { name: 'Bench User' },
    // Valid for the whole run, never due for a refresh.
    exp: now + 7 * 3600,
    max: now + 8 * 3600,
  });
  return {
    mainLines: [
      'oidc_providers:',
      '  bench:',
      '    issuer: "http://127.0.0.1:9"',
      '    client_id: bench',
      `    client_secret_file: "${join(dir, 'oidc-client-secret')}"`,
      `session_secret_file: "${join(dir, 'session-secrets')}"`,
    ],
    cookie: `tollgate_session=${sealed}`,
  };
}

/** The upstreams.yaml lines of the `/oidc` path. */
export function oidcRouteYaml(server: string): string[] {
  return [
    '      "/oidc":',
    `        servers: [${server}]`,
    '        authorization: { type: oidc, provider: bench, allow: { groups: [staff] } }',
  ];
}
