import http from 'node:http';
import https from 'node:https';

/**
 * One request with exactly these headers (fetch would replace Sec-Fetch-Mode with its own), as a
 * fetch Response so tests read it the usual way.
 */
function rawRequest(
  url: string,
  method: string,
  headers: Record<string, string>,
  loopbackNames: ReadonlySet<string>,
): Promise<Response> {
  // Test host names (`sub.test`) reach loopback, as /etc/hosts would send them.
  const lookup = loopbackNames.has(new URL(url).hostname)
    ? (_host: string, options: { all?: boolean }, done: (...args: unknown[]) => void) =>
        options.all ? done(null, [{ address: '127.0.0.1', family: 4 }]) : done(null, '127.0.0.1', 4)
    : undefined;
  return new Promise((resolve, reject) => {
    // An https URL is a test provider's (its certificate is for Tollgate to check, not this "browser").
    const secure = url.startsWith('https:');
    const req = (secure ? https : http).request(
      url,
      {
        method,
        headers,
        ...(lookup ? { lookup: lookup as never } : {}),
        ...(secure ? { rejectUnauthorized: false } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const out = new Headers();
          for (let i = 0; i < res.rawHeaders.length; i += 2) {
            out.append(res.rawHeaders[i] as string, res.rawHeaders[i + 1] as string);
          }
          const body =
            method === 'HEAD' || res.statusCode === 204 || res.statusCode === 304
              ? null
              : Buffer.concat(chunks);
          resolve(new Response(body, { status: res.statusCode ?? 200, headers: out }));
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/**
 * A browser's cookie handling, small: one jar for one host (cookies ignore ports, as browsers do),
 * Max-Age=0 deletes, and a `navigate` that follows redirects by hand like a top-level page load, so
 * a test can drive an OpenID login with fetch and look at every hop.
 */
export class CookieJar {
  readonly cookies = new Map<string, string>();
  /** Host names resolved to 127.0.0.1. */
  readonly loopbackNames: ReadonlySet<string>;

  constructor(loopbackNames: readonly string[] = []) {
    this.loopbackNames = new Set(loopbackNames);
  }

  header(): string {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  store(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair = '', ...attributes] = line.split(';');
      const equals = pair.indexOf('=');
      const name = pair.slice(0, equals).trim();
      const value = pair.slice(equals + 1).trim();
      const expired = attributes.some((attribute) => /^\s*max-age=0\s*$/i.test(attribute));
      if (expired || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  /** One request as a page load would send it, cookies stored; redirects are not followed. */
  async fetch(
    url: string,
    init: { method?: string; headers?: Record<string, string> } = {},
  ): Promise<Response> {
    const headers: Record<string, string> = {
      accept: 'text/html,application/xhtml+xml',
      'sec-fetch-mode': 'navigate',
      ...init.headers,
    };
    const cookie = this.header();
    if (cookie !== '') headers.cookie = cookie;
    const response = await rawRequest(url, init.method ?? 'GET', headers, this.loopbackNames);
    this.store(response);
    return response;
  }

  /**
   * Follows redirects from `url` until a page answers or `stopAt` matches a Location (not fetched).
   * Returns every hop's URL and status, and the last response.
   */
  async navigate(
    url: string,
    stopAt?: (location: string) => boolean,
  ): Promise<{
    hops: Array<{ url: string; status: number; location: string | null }>;
    last: Response;
    stoppedAt: string | null;
  }> {
    const hops: Array<{ url: string; status: number; location: string | null }> = [];
    let current = url;
    for (let i = 0; i < 20; i++) {
      const response = await this.fetch(current);
      const location = response.headers.get('location');
      hops.push({ url: current, status: response.status, location });
      if (location === null || response.status < 300 || response.status >= 400) {
        return { hops, last: response, stoppedAt: null };
      }
      const next = new URL(location, current).href;
      await response.arrayBuffer();
      if (stopAt?.(next)) return { hops, last: response, stoppedAt: next };
      current = next;
    }
    throw new Error(`too many redirects from ${url}`);
  }
}
