import { DEFAULT_HOST, normaliseHostKey } from '../../../routing/normalise.ts';

/**
 * Host names as the Gateway API defines them (docs/gateway-api.md#routes): a name, or a wildcard
 * `*.example.com` covering every name with at least one more label in front (`a.example.com`,
 * `a.b.example.com`, never `example.com`). The host keys produced are what the routing table's
 * matcher looks up: a name, `*.suffix`, or `DEFAULT` when neither route nor listener names one.
 */

/** A hostname in host-key form, or why it is not one. */
export function hostnameKey(hostname: string): { ok: true; value: string } | { ok: false; reason: string } {
  if (hostname.startsWith('*.')) {
    const suffix = normaliseHostKey(hostname.slice(2));
    if (!suffix.ok || suffix.value.includes(':') || suffix.value === DEFAULT_HOST)
      return { ok: false, reason: 'is not a valid wildcard hostname' };
    return { ok: true, value: `*.${suffix.value}` };
  }
  if (hostname.includes('*')) return { ok: false, reason: 'may hold a wildcard only as its first label' };
  const key = normaliseHostKey(hostname);
  if (!key.ok) return key;
  // An IP address is not a hostname in the Gateway API.
  if (/^[0-9.]+$/.test(key.value) || key.value.includes(':'))
    return { ok: false, reason: 'is an IP address, not a hostname' };
  return key;
}

/** True when the name (or wildcard) `inner` is covered by the wildcard `outer` (`*.x`). */
function coveredBy(inner: string, outer: string): boolean {
  const suffix = outer.slice(1); // `.x`
  const name = inner.startsWith('*.') ? inner.slice(1) : inner;
  return name.length > suffix.length && name.endsWith(suffix);
}

/** True when the host key `inner` (a name or a wildcard) lies within `outer` (null: every host). */
export function hostWithin(inner: string, outer: string | null): boolean {
  if (outer === null || inner === outer) return true;
  return outer.startsWith('*.') && coveredBy(inner, outer);
}

/**
 * The host keys a route serves through a listener: the intersection of the route's hostnames with
 * the listener's hostname, each side a name or a wildcard; the more specific of two overlapping ones
 * is kept. Empty when they do not meet (NoMatchingListenerHostname).
 */
export function intersectHostnames(routeHosts: readonly string[], listenerHost: string | null): string[] {
  if (routeHosts.length === 0) return [listenerHost ?? DEFAULT_HOST];
  if (listenerHost === null) return [...routeHosts];
  const result = new Set<string>();
  for (const host of routeHosts) {
    if (host === listenerHost) result.add(host);
    else if (listenerHost.startsWith('*.') && coveredBy(host, listenerHost)) result.add(host);
    else if (host.startsWith('*.') && coveredBy(listenerHost, host)) result.add(listenerHost);
  }
  return [...result];
}
