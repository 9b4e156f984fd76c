import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import { launchChromium } from '../helpers/browser.ts';
import { testScope } from '../helpers/scope.ts';
import { mintToken } from '../helpers/token-api.ts';
import type { Tollgate } from '../helpers/tollgate.ts';
import type { Upstream } from '../helpers/upstream.ts';

const MASTERKEY = 'browser-test-masterkey-6a0c';
/** A 1×1 transparent PNG. */
const PIXEL = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=',
  'base64',
);

const PAGE = `<!doctype html>
<html><head><title>report</title><link rel="stylesheet" href="/share/style.css"></head>
<body><h1>Report 42</h1><img id="pixel" src="/share/pixel.png" alt="">
<script>
  fetch('/share/data.json').then((r) => r.json()).then((d) => { document.title = 'loaded:' + d.ok; },
    (e) => { document.title = 'failed:' + e; });
</script></body></html>`;

describe('a shared link in a real browser (headless Chromium)', () => {
  const scope = testScope();
  let upstream: Upstream;
  let tollgate: Tollgate;
  let browser: Browser;

  before(async () => {
    upstream = await scope.upstream({
      name: 'site',
      handler: (req, res) => {
        const path = (req.url ?? '').split('?')[0];
        const send = (type: string, body: string | Buffer) => {
          res.writeHead(200, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
          res.end(body);
        };
        if (path === '/share/page') return send('text/html; charset=utf-8', PAGE);
        if (path === '/share/style.css') return send('text/css', 'h1 { color: rgb(1, 2, 3); }');
        if (path === '/share/pixel.png') return send('image/png', PIXEL);
        if (path === '/share/data.json') return send('application/json', '{"ok":true}');
        res.writeHead(404).end();
      },
    });
    tollgate = await scope.tollgate({
      main: { masterkey: MASTERKEY },
      upstreams: {
        upstreams: {
          DEFAULT: { paths: { '/share': { servers: [upstream.address], authorization: { type: 'jwt' } } } },
        },
      },
    });
    browser = await launchChromium();
  });
  after(() => browser?.close());

  it('the page, its stylesheet, image and fetch() all load; the address bar and every upstream request are token-free', async () => {
    const { token } = await mintToken(tollgate.apiUrl, {
      master_key: MASTERKEY,
      owner: 'shared-link',
      valid: 10,
      scope: ['/share'],
    });
    const signature = token.split('.')[2] as string;
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const statuses = new Map<string, number>();
      page.on('response', (response) => {
        statuses.set(new URL(response.url()).pathname, response.status());
      });
      await page.goto(`${tollgate.proxyUrl}/share/page?tollgatetoken=${token}`);
      // Page code as strings: it runs in the browser, not under Node's types.
      await page.waitForFunction("document.title !== 'report'", undefined, { timeout: 10_000 });
      assert.equal(await page.title(), 'loaded:true');
      assert.equal(page.url(), `${tollgate.proxyUrl}/share/page`, 'the address bar ends without the token');
      const imageLoaded = await page.evaluate("document.getElementById('pixel').naturalWidth === 1");
      assert.ok(imageLoaded, 'the image loaded');
      const color = await page.evaluate("getComputedStyle(document.querySelector('h1')).color");
      assert.equal(color, 'rgb(1, 2, 3)', 'the stylesheet applied');
      for (const path of ['/share/page', '/share/style.css', '/share/pixel.png', '/share/data.json']) {
        assert.equal(statuses.get(path), 200, `${path}: ${statuses.get(path)}`);
      }
      const cookies = await context.cookies();
      const link = cookies.find((c) => c.name === 'tollgatetoken');
      assert.equal(link?.httpOnly, true);
      assert.equal(link?.sameSite, 'Lax');
      assert.equal(link?.path, '/share');

      const paths = upstream.requests.map((r) => r.url.split('?')[0]);
      for (const path of ['/share/page', '/share/style.css', '/share/pixel.png', '/share/data.json']) {
        assert.ok(paths.includes(path), `${path} reached the upstream`);
      }
      for (const received of upstream.requests) {
        assert.ok(!received.url.includes(signature), `token in the URL of ${received.url}`);
        for (const [name, value] of Object.entries(received.headers)) {
          assert.ok(!String(value).includes(signature), `token in the ${name} header of ${received.url}`);
        }
        assert.equal(received.headers['x-tollgate-subject'], 'shared-link');
      }
    } finally {
      await context.close();
    }
  });
});
