import type { V1EndpointSlice } from '@kubernetes/client-node';
import type { ServerAddress } from '../../config/types.ts';

/**
 * The servers of a Service port: every ready endpoint of the Service's EndpointSlices, joined and
 * de-duplicated (during a rollout one endpoint may briefly sit in two slices), sorted so that the same
 * slices give the same list in every replica (compile is pure).
 *
 * Readiness follows the EndpointSlice API: `conditions.ready` false means "send no new traffic";
 * serving-but-terminating endpoints carry ready=false and are left out. An absent `ready` is to be
 * read as true, per the API's field documentation.
 */
export function readyServers(slices: readonly V1EndpointSlice[], port: number | string): ServerAddress[] {
  const seen = new Map<string, ServerAddress>();
  for (const slice of slices) {
    const portNumber = slicePort(slice, port);
    if (portNumber === null) continue;
    for (const endpoint of slice.endpoints ?? []) {
      if (endpoint.conditions?.ready === false) continue;
      // Each endpoint represents one pod; extra addresses (dual-stack) live in the other slice family.
      const host = endpoint.addresses?.[0];
      if (!host) continue;
      const raw = host.includes(':') ? `[${host}]:${portNumber}` : `${host}:${portNumber}`;
      if (!seen.has(raw)) seen.set(raw, { raw, host, port: portNumber });
    }
  }
  return [...seen.values()].sort((a, b) => (a.raw < b.raw ? -1 : a.raw > b.raw ? 1 : 0));
}

/**
 * The port number on this slice's endpoints for the reference: by name, the slice port carrying the
 * Service port's name; by number, a slice port with that (target) number. Null when it has neither.
 */
function slicePort(slice: V1EndpointSlice, port: number | string): number | null {
  for (const candidate of slice.ports ?? []) {
    if (candidate.protocol !== undefined && candidate.protocol !== 'TCP') continue;
    // A Service's only port may be unnamed: its slice port then has the name '' (or none at all).
    if (typeof port === 'string' ? (candidate.name ?? '') === port : candidate.port === port) {
      return typeof candidate.port === 'number' ? candidate.port : null;
    }
  }
  return null;
}

/** The ports the slices offer, for a message when a reference matches none of them. */
export function offeredPorts(slices: readonly V1EndpointSlice[]): string[] {
  const ports = new Set<string>();
  for (const slice of slices) {
    for (const port of slice.ports ?? [])
      ports.add(port.name ? `${port.name} (${port.port})` : String(port.port));
  }
  return [...ports].sort();
}
