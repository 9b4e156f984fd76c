import { FifoGate } from '../concurrency/fifo-gate.ts';
import { hasBody } from '../local-response.ts';
import { mirrorRequestsTotal } from '../observe/metrics.ts';
import type { ForwardingRequest } from '../request/record.ts';
import { upstreamTarget } from '../request/targets.ts';
import type { RouteMirror, UpstreamServer } from '../routing/types.ts';
import { upstreamRequestHeaders } from './headers.ts';
import { type UpstreamPools, wireFor } from './pools.ts';

/**
 * Gateway API RequestMirror (docs/gateway-api.md#filters): a copy of a request whose route has
 * mirrors goes to one server of each mirror Service, fire and forget. The copy never delays or
 * fails the client's request and its answer is read and thrown away. Only requests without a body
 * are copied (a body is streamed once, to the main server, never buffered for a copy); the share
 * of each mirror is drawn per request; at most MIRRORS_IN_FLIGHT copies are under way per process,
 * and a copy beyond that, or one whose server has no free connection, is dropped, so a slow mirror
 * costs neither memory nor the main servers' connections. Each outcome is counted in
 * tollgate_mirror_requests_total{result} (docs/observability.md).
 */

/** Copies under way at once per process; more are dropped. */
export const MIRRORS_IN_FLIGHT = 256;

/** How many copies are under way, and whether one more may start. */
/** Whether this request is copied to a mirror with `share` (0–1]: drawn per request. */
export function drawn(share: number, random: () => number = Math.random): boolean {
  return share >= 1 || random() < share;
}

/** The copies under way in this process: a copy takes a place or is dropped, never waits. */
export const mirrorsInFlight = new FifoGate(MIRRORS_IN_FLIGHT);
/** Spreads the copies of one mirror over its servers. */
let turn = 0;

/** Sends the copies of `request` its route asks for; returns at once. */
export function sendMirrors(
  request: ForwardingRequest,
  mirrors: readonly RouteMirror[],
  pools: UpstreamPools,
): void {
  let headers: string[] | null = null;
  let skipped = false;
  for (const mirror of mirrors) {
    if (!drawn(mirror.share)) continue;
    if (!skipped && hasBody(request.req)) {
      mirrorRequestsTotal.inc({ result: 'skipped_body' });
      skipped = true;
    }
    if (skipped) continue;
    const server = mirror.servers[turn++ % Math.max(mirror.servers.length, 1)];
    if (server === undefined) {
      mirrorRequestsTotal.inc({ result: 'no_server' });
      continue;
    }
    // The headers sent upstream (the route's request header rules applied), built once for every copy.
    headers ??= upstreamRequestHeaders(request, request.secure ? 'https' : 'http', request.rawHost);
    sendCopy(request, server, headers, pools);
  }
}

function sendCopy(
  request: ForwardingRequest,
  server: UpstreamServer,
  headers: string[],
  pools: UpstreamPools,
): void {
  if (!mirrorsInFlight.tryEnter()) {
    mirrorRequestsTotal.inc({ result: 'dropped' });
    return;
  }
  // Its own connection slot, never queued: a mirror at its limit loses the copy, not the client time.
  const release = pools.slots(server).tryAcquire(`${request.route.id} mirror`);
  if (release === null) {
    mirrorsInFlight.leave();
    mirrorRequestsTotal.inc({ result: 'dropped' });
    return;
  }
  const done = (result: 'sent' | 'failed') => {
    release();
    mirrorsInFlight.leave();
    mirrorRequestsTotal.inc({ result });
  };
  const path = upstreamTarget(request);
  let pool: ReturnType<UpstreamPools['get']>;
  try {
    pool = pools.get(server, wireFor(server, false));
  } catch {
    done('failed');
    return;
  }
  pool.request({ path, method: request.req.method ?? 'GET', headers, body: null }).then(
    (response) =>
      response.body.dump().then(
        () => done('sent'),
        () => done('failed'),
      ),
    () => done('failed'),
  );
}
