import { BlockList, isIP, isIPv6 } from 'node:net';

/**
 * Decides who the client is. X-Forwarded-For is attacker-controlled unless the TCP peer is a proxy
 * the operator trusts, so it is believed only from `trusted_proxies`, and only up to the first
 * untrusted hop (counting from the right).
 */
export interface ClientAddress {
  clientIp: string;
  /** What to send upstream as X-Forwarded-For. */
  forwardedFor: string;
  peerTrusted: boolean;
}

export type TrustTest = (ip: string) => boolean;

export function createTrustTest(cidrs: readonly string[]): TrustTest {
  if (cidrs.length === 0) return () => false;
  const list = new BlockList();
  for (const cidr of cidrs) {
    const [address = '', bits] = cidr.split('/');
    const family = isIPv6(address) ? 'ipv6' : 'ipv4';
    if (bits === undefined) list.addAddress(address, family);
    else list.addSubnet(address, Number(bits), family);
  }
  return (ip) => list.check(ip, isIPv6(ip) ? 'ipv6' : 'ipv4');
}

/** `::ffff:127.0.0.1` → `127.0.0.1`: dual-stack sockets report IPv4 peers in mapped form. */
export function plainIp(address: string | undefined): string {
  if (!address) return '';
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

export function resolveClientAddress(
  peer: string,
  xForwardedFor: string | undefined,
  isTrusted: TrustTest,
): ClientAddress {
  if (!isTrusted(peer)) return { clientIp: peer, forwardedFor: peer, peerTrusted: false };
  if (!xForwardedFor) return { clientIp: peer, forwardedFor: peer, peerTrusted: true };
  const hops = xForwardedFor.split(',').map((hop) => hop.trim());
  let clientIp = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i] ?? '';
    if (!hop) continue;
    // A hop that is not an IP cannot be a client address (nor a key for rate limits): stop here.
    if (isIP(hop) === 0) break;
    clientIp = hop;
    if (!isTrusted(hop)) break;
  }
  return { clientIp, forwardedFor: `${xForwardedFor}, ${peer}`, peerTrusted: true };
}
