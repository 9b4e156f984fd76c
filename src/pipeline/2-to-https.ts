import type { MainConfig } from '../config/types.ts';
import type { ProxyRequest, Stage } from './request.ts';
import { PASS, redirect, type Verdict } from './verdict.ts';

/**
 * to_https (docs/configuration.md): a plain-HTTP request on a route with `to_https` is sent to the same
 * host and path over HTTPS. 301 for GET/HEAD (cacheable, what browsers expect); 308 for every other
 * method because 301 lets clients turn a POST into a GET and drop its body.
 *
 * `request.secure` is decided by the route stage: true over the TLS listener, or when a trusted proxy
 * says `X-Forwarded-Proto: https` (TLS terminated in front of us), so those are never redirected.
 */
export function createToHttpsStage(main: Pick<MainConfig, 'httpsPort'>): Stage {
  // The public port is fixed for the process lifetime, so the suffix is computed once.
  const portSuffix = main.httpsPort === 443 ? '' : `:${main.httpsPort}`;
  return function toHttps(request: ProxyRequest): Verdict {
    if (!request.route.toHttps || request.secure) return PASS;
    const method = request.req.method;
    return redirect(method === 'GET' || method === 'HEAD' ? 301 : 308, httpsLocation(request, portSuffix));
  };
}

/**
 * `https://<host>[:port]<path>[?query]`. The host is the normalised one (no port, lower case); an
 * IPv6 literal gets its brackets back. The path is the normalised path, so the redirect never
 * points at something the proxy would refuse; the query is kept byte for byte.
 */
function httpsLocation(request: Pick<ProxyRequest, 'host' | 'path' | 'query'>, portSuffix: string): string {
  const host = request.host.includes(':') ? `[${request.host}]` : request.host;
  const query = request.query === '' ? '' : `?${request.query}`;
  return `https://${host}${portSuffix}${request.path}${query}`;
}
