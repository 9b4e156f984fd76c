import type { IncomingHttpHeaders } from 'node:http';
import type { RouteCanary } from '../routing/backend-policies.ts';
import type { ServerGroup } from './weighted.ts';

/**
 * Which side of a canary split a request goes to (docs/ingress.md#canary-ingresses), as ingress-nginx
 * decides it: the header first (`always` → canary, `never` → main; with a header value, that value →
 * canary), then the cookie (`always`/`never`), and otherwise the weight (`all`: balanced by weight).
 */
export function canaryGroup(canary: RouteCanary, headers: IncomingHttpHeaders): ServerGroup {
  if (canary.header !== null) {
    const raw = headers[canary.header];
    const value = Array.isArray(raw) ? raw[0] : raw;
    if (value !== undefined) {
      if (canary.headerValue !== null) {
        if (value === canary.headerValue) return 'canary';
      } else if (value === 'always') return 'canary';
      else if (value === 'never') return 'main';
    }
  }
  if (canary.cookie !== null) {
    const value = cookieValue(headers.cookie, canary.cookie);
    if (value === 'always') return 'canary';
    if (value === 'never') return 'main';
  }
  return 'all';
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const pair of header.split(';')) {
    const equals = pair.indexOf('=');
    if (equals === -1) continue;
    if (pair.slice(0, equals).trim() === name) return pair.slice(equals + 1).trim();
  }
  return undefined;
}
