import { BlockList, isIP } from 'node:net';

/**
 * `source_ranges` / `deny_ranges` (docs/policies.md#source-ranges): address ranges checked against the
 * client address the route stage computed (the peer, or the last untrusted X-Forwarded-For hop behind
 * trusted_proxies: docs/routing.md). IPv4-mapped IPv6 (`::ffff:10.0.0.1`) counts as the IPv4 address,
 * on both sides, so a dual-stack listener cannot slip a client past an IPv4 rule.
 */
export interface SourceRanges {
  /** True when `ip` may use the route: not denied, and allowed when an allow list is set. */
  admits(ip: string): boolean;
}

interface Range {
  address: string;
  bits: number;
  family: 'ipv4' | 'ipv6';
}

/** `10.0.0.0/8`, `2001:db8::/32`, or one address (`192.0.2.7` = /32); null when it does not parse. */
export function parseRange(text: string): { ok: true; value: Range } | { ok: false; reason: string } {
  const trimmed = text.trim();
  const slash = trimmed.indexOf('/');
  let address = slash === -1 ? trimmed : trimmed.slice(0, slash);
  const bitsText = slash === -1 ? null : trimmed.slice(slash + 1);
  let version = isIP(address);
  if (version === 0) return { ok: false, reason: `'${text}' is not an IP address or CIDR range` };
  let max = version === 4 ? 32 : 128;
  let bits = max;
  if (bitsText !== null) {
    if (!/^[0-9]{1,3}$/.test(bitsText) || Number(bitsText) > max)
      return { ok: false, reason: `'${text}': the prefix length must be 0-${max}` };
    bits = Number(bitsText);
  }
  const mapped = unmappedIPv4(address);
  if (mapped !== null) {
    if (bits < 96)
      return { ok: false, reason: `'${text}': an IPv4-mapped range needs a prefix length of 96 or more` };
    address = mapped;
    bits -= 96;
    version = 4;
    max = 32;
  }
  return { ok: true, value: { address, bits, family: version === 4 ? 'ipv4' : 'ipv6' } };
}

/** The IPv4 address inside `::ffff:a.b.c.d` (also in hex form `::ffff:a00:1`), else null. */
function unmappedIPv4(ip: string): string | null {
  const lower = ip.toLowerCase();
  if (!lower.startsWith('::ffff:')) return null;
  const rest = lower.slice(7);
  if (isIP(rest) === 4) return rest;
  const hex = /^([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(rest);
  if (hex === null) return null;
  const high = Number.parseInt(hex[1] as string, 16);
  const low = Number.parseInt(hex[2] as string, 16);
  return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
}

function blockList(ranges: readonly string[]): BlockList | null {
  if (ranges.length === 0) return null;
  const list = new BlockList();
  for (const text of ranges) {
    const parsed = parseRange(text);
    // Validation refused every range that does not parse; one reaching here is a programming error.
    if (!parsed.ok) throw new Error(`unvalidated address range: ${parsed.reason}`);
    const { address, bits, family } = parsed.value;
    list.addSubnet(address, bits, family);
  }
  return list;
}

/** Client addresses whose answer a route remembers (per compiled table: a reload starts afresh). */
const MAX_REMEMBERED = 4096;

/** null when neither list has a range: the route then has no check at all. */
export function compileSourceRanges(allow: readonly string[], deny: readonly string[]): SourceRanges | null {
  const allowed = blockList(allow);
  const denied = blockList(deny);
  if (allowed === null && denied === null) return null;
  const decide = (ip: string): boolean => {
    const address = unmappedIPv4(ip) ?? ip;
    const version = isIP(address);
    // No usable address (a Unix socket, say): only a route without an allow list takes it.
    if (version === 0) return allowed === null;
    const family = version === 4 ? 'ipv4' : 'ipv6';
    if (denied?.check(address, family)) return false;
    return allowed === null || allowed.check(address, family);
  };
  // A BlockList check builds a SocketAddress per call; the same few clients ask again and again
  // (keep-alive), so answers are remembered, in a map emptied when full so it stays small.
  const known = new Map<string, boolean>();
  return Object.freeze({
    admits(ip: string): boolean {
      let answer = known.get(ip);
      if (answer === undefined) {
        answer = decide(ip);
        if (known.size >= MAX_REMEMBERED) known.clear();
        known.set(ip, answer);
      }
      return answer;
    },
  });
}
