import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import { launchChromium } from '../helpers/browser.ts';
import { hasOpenssl, selfSigned } from '../helpers/certs.ts';
import { testScope } from '../helpers/scope.ts';
import { mintToken } from '../helpers/token-api.ts';
import type { Tollgate } from '../helpers/tollgate.ts';
import type { Upstream } from '../helpers/upstream.ts';

const MASTERKEY = 'browser-h2-masterkey-0d3e';
const PAGE = `<!doctype html>
<html><head><title>report</title><link rel="stylesheet" href="/share/style.css"></head>
<body><h1>Report over h2</h1>
<script>
  fetch('/share/data.json').then((r) => r.json()).then((d) => { document.title = 'loaded:' + d.ok; },
    (e) => { document.title = 'failed:' + e; });
</script></body></html>`;

describe('a browser on the TLS listener speaks HTTP/2, token link and cookie included', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  const scope = testScope();
  let upstream: Upstream;
  let tollgate: Tollgate;
  let browser: Browser;

  before(async () => {
    const certificate = selfSigned('app.test');
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-browser-h2-'));
    writeFileSync(join(dir, 'tls.crt'), certificate.cert);
    writeFileSync(join(dir, 'tls.key'), certificate.key);
    scope.keep({ close: async () => rmSync(dir, { recursive: true, force: true }) });
    upstream = await scope.upstream({
      name: 'site',
      handler: (req, res) => {
        const path = (req.url ?? '').split('?')[0];
        const send = (type: string, body: string) => {
          res.writeHead(200, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
          res.end(body);
        };
        if (path === '/share/page') return send('text/html; charset=utf-8', PAGE);
        if (path === '/share/style.css') return send('text/css', 'h1 { color: rgb(4, 5, 6); }');
        if (path === '/share/data.json') return send('application/json', '{"ok":true}');
        res.writeHead(404).end();
      },
    });
    tollgate = await scope.tollgate({
      main: {
        masterkey: MASTERKEY,
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: join(dir, 'tls.crt'),
        tls_key_file: join(dir, 'tls.key'),
      },
      upstreams: {
        upstreams: {
          DEFAULT: { paths: { '/share': { servers: [upstream.address], authorization: { type: 'jwt' } } } },
        },
      },
    });
    browser = await launchChromium({ ignoreCertificateErrors: true });
  });
  after(() => browser?.close());

  it("the page's nextHopProtocol is h2; the link's 303 and cookie work over it; the log says protocol 2", async () => {
    const { token } = await mintToken(tollgate.apiUrl, {
      master_key: MASTERKEY,
      owner: 'h2-link',
      valid: 10,
      scope: ['/share'],
    });
    const origin = `https://127.0.0.1:${tollgate.tlsPort}`;
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    try {
      const page = await context.newPage();
      await page.goto(`${origin}/share/page?tollgatetoken=${token}`);
      await page.waitForFunction("document.title !== 'report'", undefined, { timeout: 10_000 });
      assert.equal(await page.title(), 'loaded:true');
      assert.equal(page.url(), `${origin}/share/page`, 'the address bar ends without the token');
      // Page code as strings: it runs in the browser, not under Node's types.
      assert.equal(await page.evaluate('performance.getEntries()[0].nextHopProtocol'), 'h2');
      const protocols = (await page.evaluate(
        "performance.getEntriesByType('resource').map((e) => e.nextHopProtocol)",
      )) as string[];
      assert.ok(protocols.length >= 2 && protocols.every((p) => p === 'h2'), protocols.join());
      assert.equal(
        await page.evaluate("getComputedStyle(document.querySelector('h1')).color"),
        'rgb(4, 5, 6)',
      );
      const lines = tollgate.logs().filter((l) => l.msg === 'access' && String(l.path).startsWith('/share/'));
      assert.ok(lines.length >= 3);
      for (const line of lines) assert.equal(line.protocol, '2', JSON.stringify(line));
      // The sub-resources were authorised by the link cookie, sent over HTTP/2.
      assert.ok(
        lines.some((l) => l.path === '/share/data.json' && l.status === 200 && l.subject === 'h2-link'),
      );
    } finally {
      await context.close();
    }
  });
});
