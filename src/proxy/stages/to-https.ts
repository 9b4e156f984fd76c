import type { MainConfig } from '../../config/types.ts';
import { writeLocalResponse } from '../../local-response.ts';
import type { ProxyRequest, Stage } from '../context.ts';

/**
 * to_https (BEHAVIOUR.md §4): a plain-HTTP request on a route with `to_https` is sent to the same
 * host and path over HTTPS. 301 for GET/HEAD (cacheable, what browsers expect); 308 for every other
 * method because 301 lets clients turn a POST into a GET and drop its body.
 *
 * `request.secure` is decided by proxy/server: true over the TLS listener, or when a trusted proxy
 * says `X-Forwarded-Proto: https` (TLS terminated in front of us), so those are never redirected.
 */
export function createToHttpsStage(main: Pick<MainConfig, 'httpsPort'>): Stage {
  // The public port is fixed for the process lifetime, so the suffix is computed once.
  const portSuffix = main.httpsPort === 443 ? '' : `:${main.httpsPort}`;
  return function toHttps(request: ProxyRequest): boolean {
    if (!request.route.toHttps || request.secure) return true;
    const location = httpsLocation(request, portSuffix);
    const method = request.req.method;
    const status = method === 'GET' || method === 'HEAD' ? 301 : 308;
    const body = `Redirecting to ${location}\n`;
    writeLocalResponse(request.res, status, { location, 'content-type': 'text/plain; charset=utf-8' }, body);
    return false;
  };
}

/**
 * `https://<host>[:port]<path>[?query]`. The host is the normalised one (no port, lower case); an
 * IPv6 literal gets its brackets back. The path is the normalised path, so the redirect never
 * points at something the proxy would refuse; the query is kept byte for byte.
 */
export function httpsLocation(
  request: Pick<ProxyRequest, 'host' | 'path' | 'query'>,
  portSuffix: string,
): string {
  const host = request.host.includes(':') ? `[${request.host}]` : request.host;
  const query = request.query === '' ? '' : `?${request.query}`;
  return `https://${host}${portSuffix}${request.path}${query}`;
}
