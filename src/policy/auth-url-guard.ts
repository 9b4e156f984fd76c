import { BlockList, isIPv4, isIPv6 } from 'node:net';

/**
 * Where a Kubernetes object's auth service may not be (docs/ingress.md#annotations,
 * docs/gateway-api.md#tollgatepolicy, docs/security.md): an Ingress's `auth-url`, a TollgatePolicy's
 * forward `url`, ext_authz `grpc.address` or `jwks_uri`. Tollgate calls that URL from inside its pod
 * and lets a request through on a 2xx, so an author who names `http://127.0.0.1:<admin port>/healthz`
 * (always 200), the cloud metadata address or another pod-local service turns forward auth into
 * "open" and probes the pod's loopback. upstreams.yaml's URLs are the operator's and are not checked.
 * The policy reader (policy/forward) checks a URL is an http(s) URL before asking here.
 *
 * Checked on the URL as written (the WHATWG parser already turned `2130706433`, `0x7f.1` and the like
 * into dotted IPv4): loopback (127.0.0.0/8, ::1, `localhost` and `*.localhost`), link-local
 * (169.254.0.0/16, fe80::/10), unspecified (0.0.0.0/8, ::), IPv4-mapped IPv6 forms of these, and
 * any address:port that reaches one of Tollgate's own listeners. Not checked: a DNS name that
 * resolves to such an address (names are not resolved here; see docs/decisions.md#known-limits).
 */

const refusedV4 = new BlockList();
refusedV4.addSubnet('127.0.0.0', 8, 'ipv4');
refusedV4.addSubnet('169.254.0.0', 16, 'ipv4');
refusedV4.addSubnet('0.0.0.0', 8, 'ipv4');
const refusedV6 = new BlockList();
refusedV6.addAddress('::1', 'ipv6');
refusedV6.addAddress('::', 'ipv6');
refusedV6.addSubnet('fe80::', 10, 'ipv6');

/** True when a connection to host:port would reach one of Tollgate's own listeners. */
export type ReachesTollgate = (host: string, port: number) => boolean;

/** Why `url` may not be a Kubernetes object's auth service, or null when it may. `url` is a checked http(s) URL. */
export function authUrlTargetProblem(url: string, reachesTollgate?: ReachesTollgate): string | null {
  const parsed = new URL(url);
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const name = host.replace(/\.$/, '');
  if (name === 'localhost' || name.endsWith('.localhost')) return `${url} names localhost (loopback)`;
  const address = isIPv6(host) ? (mappedIPv4(host) ?? host) : host;
  if (isIPv4(address) && refusedV4.check(address, 'ipv4'))
    return `${url} targets ${kindOfV4(address)} address ${address}`;
  if (isIPv6(address) && refusedV6.check(address, 'ipv6'))
    return `${url} targets ${kindOfV6(address)} address ${address}`;
  const port = parsed.port === '' ? (parsed.protocol === 'https:' ? 443 : 80) : Number(parsed.port);
  if ((isIPv4(address) || isIPv6(address)) && reachesTollgate?.(address, port))
    return `${url} targets Tollgate's own listener (port ${port})`;
  return null;
}

function kindOfV4(address: string): string {
  const first = Number(address.split('.')[0]);
  return first === 127 ? 'the loopback' : first === 169 ? 'the link-local' : 'an unspecified';
}

function kindOfV6(address: string): string {
  const lower = address.toLowerCase();
  return lower === '::1' ? 'the loopback' : lower === '::' ? 'the unspecified' : 'the link-local';
}

/** `::ffff:a.b.c.d` (the URL parser writes it `::ffff:7f00:1`) as the IPv4 address it carries. */
function mappedIPv4(host: string): string | null {
  const hex = /^(?:0{0,4}:){0,5}:?ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(host);
  if (hex) {
    const high = Number.parseInt(hex[1] as string, 16);
    const low = Number.parseInt(hex[2] as string, 16);
    return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
  }
  const dotted = /^(?:0{0,4}:){0,5}:?ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(host);
  return dotted && isIPv4(dotted[1] as string) ? (dotted[1] as string) : null;
}
