import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type InProcessTollgate, request, startInProcess } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/**
 * Seed §5 rule 4: with a global `authorization`, every per-path one is ignored and every host and
 * path needs the global credentials, for every method.
 */
const MASTERKEY = 'global-policy-masterkey';
const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/** Credentials of the per-path policies below: all must be refused once a global policy exists. */
const PATH_CREDENTIALS: Array<Record<string, string>> = [
  { authorization: basic('admin', 'path-admin-pw') },
  { 'x-api-key': 'path-key' },
];

const TARGETS = [
  { host: 'a.example.com', path: '/' },
  { host: 'a.example.com', path: '/admin/x' },
  { host: 'a.example.com', path: '/key' },
  { host: 'b.example.com', path: '/jwt/y' },
  { host: 'b.example.com', path: '/open' },
  { host: 'unknown.example.org', path: '/anything' },
];

const GLOBALS = [
  { type: 'basic', policy: { type: 'basic', creds: 'global:global-pw' }, subject: 'global' },
  { type: 'apikey', policy: { type: 'apikey', creds: 'global-key' }, subject: 'apikey' },
  { type: 'api', policy: { type: 'api', data: 'global-key' }, subject: 'apikey' },
  { type: 'jwt', policy: { type: 'jwt' }, subject: 'global-owner' },
] as const;

describe('a global authorization overrides every per-path one, on every host and path', () => {
  let upstream: Upstream;
  before(async () => {
    upstream = await startUpstream();
  });
  after(() => upstream?.close());

  for (const global of GLOBALS) {
    describe(`global ${global.type}`, () => {
      let tollgate: InProcessTollgate;
      let good: Record<string, string>;

      before(async () => {
        const servers = [upstream.address];
        tollgate = await startInProcess({
          main: { masterkey: MASTERKEY },
          upstreams: {
            authorization: global.policy,
            upstreams: {
              'a.example.com': {
                paths: {
                  '/': { servers },
                  '/admin': { servers, authorization: { type: 'basic', creds: 'admin:path-admin-pw' } },
                  '/key': { servers, authorization: { type: 'apikey', creds: 'path-key' } },
                },
              },
              'b.example.com': {
                paths: { '/jwt': { servers, authorization: { type: 'jwt' } }, '/open': { servers } },
              },
              DEFAULT: { paths: { '/': { servers } } },
            },
          },
        });
        if (global.type === 'basic') good = { authorization: basic('global', 'global-pw') };
        else if (global.type === 'jwt') {
          const res = await request(`${tollgate.apiUrl}/jwt`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ master_key: MASTERKEY, owner: 'global-owner', valid: 5 }),
          });
          good = { authorization: `Bearer ${res.json<{ token: string }>().token}` };
        } else good = { 'x-api-key': 'global-key' };
      });
      after(() => tollgate?.stop());

      it('refuses requests without credentials everywhere', async () => {
        for (const { host, path } of TARGETS) {
          const res = await request(tollgate.proxyUrl, { path, headers: { host } });
          assert.equal(res.status, 401, `${host}${path}`);
          assert.equal(res.json<{ error: string }>().error, 'missing_credentials', `${host}${path}`);
        }
      });

      it('refuses the per-path credentials everywhere', async () => {
        for (const { host, path } of TARGETS) {
          for (const credentials of PATH_CREDENTIALS) {
            const res = await request(tollgate.proxyUrl, { path, headers: { host, ...credentials } });
            assert.equal(res.status, 401, `${host}${path} with ${Object.keys(credentials)[0]}`);
          }
        }
      });

      it('accepts the global credentials everywhere, with the global subject', async () => {
        for (const { host, path } of TARGETS) {
          const res = await request(tollgate.proxyUrl, { path, headers: { host, ...good } });
          assert.equal(res.status, 200, `${host}${path}`);
          assert.equal(
            res.json<{ headers: Record<string, string> }>().headers['x-tollgate-subject'],
            global.subject,
          );
        }
      });
    });
  }
});
