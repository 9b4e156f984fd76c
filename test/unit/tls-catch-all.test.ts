/**
 * A Gateway HTTPS listener without hostname registers a catch-all certificate (`*`,
 * docs/gateway-api.md#gateways): the TLS listener serves it for names nothing else claims, in place
 * of main.yaml's default pair, but never where that default pair checks client certificates (the
 * check would be lifted for every name the default serves).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { createSecureContext, type SecureContext } from 'node:tls';
import { createLogger } from '../../src/log.ts';
import { createTlsContextProvider } from '../../src/sources/tls-certificate.ts';
import { hasOpenssl, SecretVolume, selfSigned } from '../helpers/certs.ts';

const skip = hasOpenssl() ? false : 'openssl is not installed';
const logger = createLogger('silent');

/** What the server's SNICallback hands the handshake for `name` (undefined: the default pair). */
function chosen(
  options: ReturnType<ReturnType<typeof createTlsContextProvider>['serverOptions']>,
  name: string,
) {
  let context: SecureContext | undefined | 'unset' = 'unset';
  const callback = options.SNICallback as (
    this: unknown,
    name: string,
    cb: (error: Error | null, ctx?: SecureContext) => void,
  ) => void;
  callback.call({}, name, (_error, ctx) => {
    context = ctx;
  });
  return context;
}

describe('catch-all certificate and the default pair', { skip }, () => {
  const own = selfSigned('default.test');
  const gateway = selfSigned('gateway.test');
  const volume = new SecretVolume({ 'tls.crt': own.cert, 'tls.key': own.key, 'ca.pem': own.cert });
  after(() => volume.remove());
  const pair = {
    certFile: volume.path('tls.crt'),
    keyFile: volume.path('tls.key'),
    certKey: 'c',
    keyKey: 'k',
  };
  const catchAll = createSecureContext({ cert: gateway.cert, key: gateway.key });

  it('served for an unclaimed name when the default pair checks no client certificate', () => {
    const provider = createTlsContextProvider({ pairs: [pair], logger });
    provider.store.set('gateway', [{ names: ['*'], context: catchAll }]);
    assert.equal(chosen(provider.serverOptions(), 'anything.example'), catchAll);
    provider.close();
  });

  it('not served where the default pair checks client certificates: the default (and its check) answers', () => {
    const provider = createTlsContextProvider({
      pairs: [
        {
          ...pair,
          clientCertificates: {
            settings: { caFile: volume.path('ca.pem'), crlFile: null, mode: 'require', verifyDepth: 1 },
            key: 'tls_client_certificates',
          },
        },
      ],
      logger,
    });
    provider.store.set('gateway', [{ names: ['*'], context: catchAll }]);
    assert.equal(chosen(provider.serverOptions(), 'anything.example'), undefined);
    provider.close();
  });
});
