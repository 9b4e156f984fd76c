import { BlockList, isIP, isIPv4, isIPv6 } from 'node:net';
import { isHostname } from '../routing/normalise.ts';
import type { ListenAddress, ServerAddress } from './types.ts';

/** Either the parsed value or a sentence saying what is wrong (never echoing secrets). */
export type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };

const PORT = /^\d{1,5}$/;

/**
 * `host:port`, `[v6]:port` or `:port` (all interfaces). Port 0 is allowed: the OS picks one, which
 * tests rely on.
 */
export function parseListenAddress(text: string): Parsed<ListenAddress> {
  const split = splitHostPort(text, 'host:port, [v6]:port or :port, e.g. 0.0.0.0:8080');
  if (!split.ok) return split;
  const { host, port, bracketed } = split.value;
  if (!isPort(port, 0)) return { ok: false, reason: `'${text}': port must be a number from 0 to 65535` };
  if (host === '') {
    if (bracketed) return { ok: false, reason: 'empty brackets: write [::]:port for all IPv6 interfaces' };
    return { ok: true, value: { host: '0.0.0.0', port: Number(port) } };
  }
  const hostProblem = checkHost(host, bracketed);
  if (hostProblem) return { ok: false, reason: `'${text}': ${hostProblem}` };
  return { ok: true, value: { host, port: Number(port) } };
}

/**
 * An upstream server: `ip:port`, `[v6]:port` or `hostname:port`, port 1..65535, optionally written
 * `https://…` for TLS (docs/traffic.md#tls-to-upstreams). `http://` is refused: plain is the default,
 * and accepting it would make two spellings of one server.
 */
export function parseServerAddress(text: string): Parsed<ServerAddress> {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(text);
  if (scheme !== null && scheme[1]?.toLowerCase() !== 'https') {
    return {
      ok: false,
      reason: `'${text}': only https:// may be written; a plain server is host:port, e.g. 10.0.0.5:8080`,
    };
  }
  const tls = scheme !== null;
  const rest = tls ? text.slice(scheme[0].length) : text;
  if (tls && /[/?#@]/.test(rest)) {
    return { ok: false, reason: `'${text}': write https://host:port, with no path, query or credentials` };
  }
  const split = splitHostPort(rest, 'ip:port, [v6]:port or hostname:port, e.g. 10.0.0.5:8080');
  if (!split.ok) return split;
  const { host, port, bracketed } = split.value;
  if (host === '') return { ok: false, reason: `'${text}' has no host` };
  const hostProblem = checkHost(host, bracketed);
  if (hostProblem) return { ok: false, reason: `'${text}': ${hostProblem}` };
  if (!isPort(port, 1)) return { ok: false, reason: `'${text}': port must be a number from 1 to 65535` };
  return { ok: true, value: { raw: text, host, port: Number(port), ...(tls ? { tls } : {}) } };
}

/**
 * A `trusted_proxies` entry: a CIDR, or a plain IP taken as /32 or /128. Returned as a CIDR so
 * consumers can always split on '/'.
 */
export function parseCidr(text: string): Parsed<string> {
  const [address = '', prefix, extra] = text.split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined) {
    return { ok: false, reason: `'${text}' is not an IP address or CIDR such as 10.0.0.0/8 or fd00::/8` };
  }
  const maxBits = family === 4 ? 32 : 128;
  const bits = prefix === undefined ? maxBits : /^\d{1,3}$/.test(prefix) ? Number(prefix) : Number.NaN;
  if (!(bits >= 0 && bits <= maxBits)) {
    return { ok: false, reason: `'${text}': prefix length must be 0..${maxBits}` };
  }
  try {
    // The same check node:net applies when the forwarder builds its BlockList, done once here.
    new BlockList().addSubnet(address, bits, family === 4 ? 'ipv4' : 'ipv6');
  } catch {
    return { ok: false, reason: `'${text}' is not a valid CIDR` };
  }
  return { ok: true, value: `${address}/${bits}` };
}

function splitHostPort(
  text: string,
  expected: string,
): Parsed<{ host: string; port: string; bracketed: boolean }> {
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close === -1 || text[close + 1] !== ':')
      return { ok: false, reason: `'${text}': expected ${expected}` };
    return { ok: true, value: { host: text.slice(1, close), port: text.slice(close + 2), bracketed: true } };
  }
  const colon = text.lastIndexOf(':');
  if (colon === -1) return { ok: false, reason: `'${text}' has no port; expected ${expected}` };
  const host = text.slice(0, colon);
  if (host.includes(':')) {
    return { ok: false, reason: `'${text}': IPv6 addresses need brackets, e.g. [::1]:8080` };
  }
  return { ok: true, value: { host, port: text.slice(colon + 1), bracketed: false } };
}

function checkHost(host: string, bracketed: boolean): string | undefined {
  if (bracketed) {
    // Zone ids (`fe80::1%eth0`) pass isIPv6 but do not survive being put into a URL origin.
    if (host.includes('%')) return `'${host}': IPv6 zone ids are not supported`;
    return isIPv6(host) ? undefined : `'${host}' in brackets is not an IPv6 address`;
  }
  if (isIPv4(host) || isHostname(host)) return undefined;
  return `'${host}' is neither an IP address nor a valid host name`;
}

function isPort(text: string, min: number): boolean {
  if (!PORT.test(text)) return false;
  const port = Number(text);
  return port >= min && port <= 65535;
}
