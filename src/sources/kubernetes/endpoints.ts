import { BlockList, isIPv4, isIPv6 } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { V1EndpointSlice } from '@kubernetes/client-node';
import type { ListenAddress, ServerAddress } from '../../config/types.ts';

/**
 * Why an endpoint of the API was not used (docs/security.md, "Discovered endpoints"): the label of
 * `tollgate_kubernetes_endpoints_dropped{reason}` and of the warning logged once per endpoint.
 */
export type DropReason =
  | 'address_type'
  | 'not_ip'
  | 'unspecified'
  | 'link_local'
  | 'multicast'
  | 'broadcast'
  | 'own_listener'
  | 'port'
  | 'malformed';

export const DROP_REASONS: readonly DropReason[] = [
  'address_type',
  'not_ip',
  'unspecified',
  'link_local',
  'multicast',
  'broadcast',
  'own_listener',
  'port',
  'malformed',
];

export interface DroppedEndpoint {
  reason: DropReason;
  /** The slice (namespace/name, or `?` when even that is missing). */
  slice: string;
  /** What was refused, as the API wrote it (JSON for non-strings), for the warning. */
  value: string;
}

export interface EndpointFilter {
  /** Tollgate's own listeners (bound addresses): an endpoint reaching one of them is dropped. */
  ownListeners?: (() => readonly ListenAddress[]) | undefined;
  /** Told about every endpoint (or slice) left out, each time the servers are computed. */
  onDrop?: (drop: DroppedEndpoint) => void;
}

/**
 * The servers of a Service port: every ready endpoint of the Service's EndpointSlices, joined and
 * de-duplicated (during a rollout one endpoint may briefly sit in two slices), sorted so that the same
 * slices give the same list in every replica (compile is pure).
 *
 * Readiness follows the EndpointSlice API: `conditions.ready` false means "send no new traffic";
 * serving-but-terminating endpoints carry ready=false and are left out. An absent `ready` is to be
 * read as true, per the API's field documentation.
 *
 * Everything the API hands over is input (docs/security.md): only IPv4/IPv6 slices, IP literals of
 * the slice's family that are neither unspecified, link-local, multicast nor broadcast and do not
 * reach Tollgate's own listeners, TCP ports 1-65535. Anything else, malformed objects included, is
 * dropped here, once per table, and reported to `onDrop`; nothing of it reaches a request.
 */
export function readyServers(
  slices: readonly V1EndpointSlice[],
  port: number | string,
  filter: EndpointFilter = {},
): ServerAddress[] {
  const drop = filter.onDrop ?? (() => {});
  const own = filter.ownListeners?.() ?? [];
  const seen = new Map<string, ServerAddress>();
  for (const slice of slices as unknown[]) {
    if (!isObject(slice)) {
      drop({ reason: 'malformed', slice: '?', value: describe(slice) });
      continue;
    }
    const name = sliceName(slice);
    const family = slice.addressType === 'IPv4' ? 4 : slice.addressType === 'IPv6' ? 6 : null;
    const portNumber = slicePort(slice, port, name, drop);
    if (portNumber === null) continue;
    if (!Array.isArray(slice.endpoints)) {
      if (slice.endpoints !== undefined && slice.endpoints !== null)
        drop({ reason: 'malformed', slice: name, value: `endpoints: ${describe(slice.endpoints)}` });
      continue;
    }
    if (family === null) {
      // FQDN slices would have Tollgate resolve and call any DNS name the API names.
      drop({ reason: 'address_type', slice: name, value: `addressType: ${describe(slice.addressType)}` });
      continue;
    }
    for (const endpoint of slice.endpoints as unknown[]) {
      if (!isObject(endpoint) || !Array.isArray(endpoint.addresses)) {
        drop({ reason: 'malformed', slice: name, value: `endpoint ${describe(endpoint)}` });
        continue;
      }
      const conditions = endpoint.conditions;
      if (conditions !== undefined && conditions !== null && !isObject(conditions)) {
        drop({ reason: 'malformed', slice: name, value: `conditions ${describe(conditions)}` });
        continue;
      }
      if (isObject(conditions) && conditions.ready === false) continue;
      // Each endpoint represents one pod; extra addresses (dual-stack) live in the other slice family.
      const host: unknown = endpoint.addresses[0];
      if (host === undefined) continue;
      if (typeof host !== 'string') {
        drop({ reason: 'malformed', slice: name, value: `address ${describe(host)}` });
        continue;
      }
      const reason = addressProblem(host, family, portNumber, own);
      if (reason !== null) {
        drop({ reason, slice: name, value: `${host} port ${portNumber}` });
        continue;
      }
      const raw = family === 6 ? `[${host}]:${portNumber}` : `${host}:${portNumber}`;
      if (!seen.has(raw)) seen.set(raw, { raw, host, port: portNumber });
    }
  }
  return [...seen.values()].sort((a, b) => (a.raw < b.raw ? -1 : a.raw > b.raw ? 1 : 0));
}

/**
 * The port number on this slice's endpoints for the reference: by name, the slice port carrying the
 * Service port's name; by number, a slice port with that (target) number. Null when it has neither,
 * or when the matching port is no TCP port number of 1-65535 (dropped as `port`).
 */
function slicePort(
  slice: Record<string, unknown>,
  port: number | string,
  name: string,
  drop: (dropped: DroppedEndpoint) => void,
): number | null {
  if (slice.ports === undefined || slice.ports === null) return null;
  if (!Array.isArray(slice.ports)) {
    drop({ reason: 'malformed', slice: name, value: `ports: ${describe(slice.ports)}` });
    return null;
  }
  for (const candidate of slice.ports as unknown[]) {
    if (!isObject(candidate)) {
      drop({ reason: 'malformed', slice: name, value: `port ${describe(candidate)}` });
      continue;
    }
    if (candidate.protocol !== undefined && candidate.protocol !== null && candidate.protocol !== 'TCP')
      continue;
    // A Service's only port may be unnamed: its slice port then has the name '' (or none at all).
    if (typeof port === 'string' ? (candidate.name ?? '') === port : candidate.port === port) {
      if (validPort(candidate.port)) return candidate.port;
      drop({ reason: 'port', slice: name, value: `port ${describe(candidate.port)}` });
      return null;
    }
  }
  return null;
}

const validPort = (value: unknown): value is number =>
  typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 65535;

const refused = new BlockList();
refused.addSubnet('0.0.0.0', 8, 'ipv4');
refused.addSubnet('169.254.0.0', 16, 'ipv4');
refused.addSubnet('224.0.0.0', 4, 'ipv4');
refused.addAddress('255.255.255.255', 'ipv4');
refused.addAddress('::', 'ipv6');
refused.addSubnet('fe80::', 10, 'ipv6');
refused.addSubnet('ff00::', 8, 'ipv6');

/** Why this address cannot be a server, or null when it can. */
function addressProblem(
  host: string,
  family: 4 | 6,
  port: number,
  own: readonly ListenAddress[],
): DropReason | null {
  // A zone index (fe80::1%eth0) or brackets are no IP literal of the API's schema.
  if (host.includes('%') || !(isIPv4(host) || isIPv6(host))) return 'not_ip';
  if (family === 4 ? !isIPv4(host) : !isIPv6(host)) return 'address_type';
  const v4 = family === 4 ? host : mappedIPv4(host);
  if (v4 !== null) {
    if (refused.check(v4, 'ipv4')) return ipv4Reason(v4);
  } else if (refused.check(host, 'ipv6')) {
    if (unspecifiedV6.check(host, 'ipv6')) return 'unspecified';
    return host.toLowerCase().startsWith('ff') ? 'multicast' : 'link_local';
  }
  if (own.some((listener) => reaches(listener, v4 ?? host, port))) return 'own_listener';
  return null;
}

function ipv4Reason(v4: string): DropReason {
  const first = Number(v4.split('.')[0]);
  if (first === 0) return 'unspecified';
  if (first === 169) return 'link_local';
  if (first >= 224 && first <= 239) return 'multicast';
  return 'broadcast';
}

const unspecifiedV6 = new BlockList();
unspecifiedV6.addAddress('::', 'ipv6');

/** `::ffff:a.b.c.d` (and its hex spelling) as the IPv4 address it carries, else null. */
function mappedIPv4(host: string): string | null {
  const lower = host.toLowerCase();
  const dotted = /^(?:0{0,4}:){0,5}:?ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (dotted && isIPv4(dotted[1] as string)) return dotted[1] as string;
  const hex = /^(?:0{0,4}:){0,5}:?ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (!hex) return null;
  const high = Number.parseInt(hex[1] as string, 16);
  const low = Number.parseInt(hex[2] as string, 16);
  return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
}

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/**
 * True when a connection to host:port would reach this listener: same port, and the address is the
 * listener's own or any address of this host (loopback, or an interface's) — a listener bound to a
 * wildcard or loopback address answers there, and so may another process's bind of the same port.
 */
export function reaches(listener: ListenAddress, host: string, port: number): boolean {
  if (listener.port !== port || port === 0) return false;
  if (sameAddress(listener.host, host)) return true;
  return isLocalAddress(host);
}

function sameAddress(a: string, b: string): boolean {
  const family = (value: string) => (isIPv4(value) ? 'ipv4' : 'ipv6');
  if (!(isIPv4(a) || isIPv6(a)) || !(isIPv4(b) || isIPv6(b))) return a === b;
  const list = new BlockList();
  list.addAddress(a, family(a));
  return list.check(b, family(b));
}

function isLocalAddress(host: string): boolean {
  const family = isIPv4(host) ? 'ipv4' : 'ipv6';
  if (loopback.check(host, family)) return true;
  for (const addresses of Object.values(networkInterfaces())) {
    for (const address of addresses ?? []) if (sameAddress(address.address, host)) return true;
  }
  return false;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function sliceName(slice: Record<string, unknown>): string {
  const metadata = isObject(slice.metadata) ? slice.metadata : {};
  const name = typeof metadata.name === 'string' ? metadata.name : '?';
  return typeof metadata.namespace === 'string' ? `${metadata.namespace}/${name}` : name;
}

function describe(value: unknown): string {
  if (typeof value === 'string') return value.slice(0, 100);
  try {
    return (JSON.stringify(value) ?? String(value)).slice(0, 100);
  } catch {
    return typeof value;
  }
}

/** The ports the slices offer, for a message when a reference matches none of them. */
export function offeredPorts(slices: readonly V1EndpointSlice[]): string[] {
  const ports = new Set<string>();
  for (const slice of slices as unknown[]) {
    if (!isObject(slice) || !Array.isArray(slice.ports)) continue;
    for (const port of slice.ports as unknown[]) {
      if (!isObject(port)) continue;
      ports.add(
        typeof port.name === 'string' && port.name ? `${port.name} (${port.port})` : String(port.port),
      );
    }
  }
  return [...ports].sort();
}
