import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSecureContext } from 'node:tls';
import { CertificateStore } from '../../src/sources/certificate-store.ts';

const context = () => createSecureContext({});

describe('SNI certificate store', () => {
  it('exact name first, then a wildcard for exactly one label, else null (the default)', () => {
    const store = new CertificateStore();
    const exact = context();
    const wild = context();
    const deeper = context();
    store.set('files', [
      { names: ['*.example.com'], context: wild },
      { names: ['api.example.com'], context: exact },
      { names: ['*.b.example.com'], context: deeper },
    ]);
    assert.equal(store.select('api.example.com'), exact);
    assert.equal(store.select('API.Example.COM.'), exact);
    assert.equal(store.select('www.example.com'), wild);
    assert.equal(store.select('a.b.example.com'), deeper);
    assert.equal(store.select('example.com'), null);
    assert.equal(store.select('x.y.example.com'), null);
    assert.equal(store.select('localhost'), null);
  });

  it('`*` is a catch-all apart: select and served never give it (the TLS listener decides), catchAll does, the first one', () => {
    const store = new CertificateStore();
    const named = context();
    const any = context();
    const later = context();
    store.set('files', [{ names: ['a.test'], context: named }]);
    store.set('gateway', [
      { names: ['*', 'b.test'], context: any },
      { names: ['*'], context: later },
    ]);
    assert.equal(store.select('a.test'), named);
    assert.equal(store.select('b.test'), any);
    assert.equal(store.select('c.test'), null);
    assert.equal(store.catchAll()?.context, any);
    store.delete('gateway');
    assert.equal(store.catchAll(), null);
  });

  it('sources are independent: one is replaced or removed without touching the others; the earlier wins a name', () => {
    const store = new CertificateStore();
    const fromFiles = context();
    const fromSecret = context();
    const other = context();
    store.set('files', [{ names: ['shared.test'], context: fromFiles }]);
    store.set('ingress', [
      { names: ['shared.test'], context: fromSecret },
      { names: ['only-secret.test'], context: other },
    ]);
    assert.equal(store.select('shared.test'), fromFiles);
    assert.equal(store.select('only-secret.test'), other);
    store.set('ingress', []);
    assert.equal(store.select('only-secret.test'), null);
    assert.equal(store.select('shared.test'), fromFiles);
    store.delete('files');
    assert.equal(store.select('shared.test'), null);
  });

  it('answers SNICallback with the chosen context, or none for the default', () => {
    const store = new CertificateStore();
    const chosen = context();
    store.set('files', [{ names: ['a.test'], context: chosen }]);
    let got: unknown = 'unset';
    store.sniCallback('a.test', (_error, ctx) => {
      got = ctx;
    });
    assert.equal(got, chosen);
    store.sniCallback('b.test', (_error, ctx) => {
      got = ctx;
    });
    assert.equal(got, undefined);
  });

  it('says when some certificate carries a client-certificate check, and tells its listeners of every change', () => {
    const store = new CertificateStore();
    let changes = 0;
    store.onChange(() => {
      changes++;
    });
    store.set('files', [{ names: ['a.test'], context: context() }]);
    assert.equal(store.anyClientCertificates, false);
    const policy = {
      key: 'ingress apps/a',
      mode: 'require' as const,
      verifyDepth: 1,
      files: { ca: Buffer.from(''), crl: null, crls: [], authorities: [] },
    };
    store.set('kubernetes-ingress', [{ names: ['b.test'], context: context(), clientCertificates: policy }]);
    assert.equal(store.anyClientCertificates, true);
    assert.equal(store.served('b.test')?.clientCertificates, policy);
    store.delete('kubernetes-ingress');
    assert.equal(store.anyClientCertificates, false);
    assert.equal(changes, 3);
  });
});
