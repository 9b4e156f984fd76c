import type { IncomingHttpHeaders } from 'node:http';

/**
 * Conditions a route may carry beside its host and path (docs/gateway-api.md#routes): a Gateway API
 * HTTPRoute match on the method, headers and query parameters. Several routes may share one host and
 * path, each with its own conditions; the matcher finds the path first (one Map lookup per segment,
 * as ever), then takes the first of that path's routes whose conditions hold, in the order the
 * source gave them (the Gateway API precedence). Routes from upstreams.yaml and Ingresses carry none,
 * and their lookup pays nothing for this.
 */
export interface RouteConditions {
  /** Upper-case method, or null for any. */
  readonly method: string | null;
  /** Every one must be present with exactly this value; names lower case. */
  readonly headers: readonly NameValue[];
  /** Every one must be present (first occurrence) with exactly this value; names as written (case matters). */
  readonly query: readonly NameValue[];
  /**
   * The kind of listener the route was attached through (docs/gateway-api.md#ports): true, only
   * HTTPS listeners (the request must be `secure`: over TLS, or HTTPS at a trusted proxy); false,
   * only HTTP listeners (a plain request); null or absent, both.
   */
  readonly secure?: boolean | null;
}

export interface NameValue {
  readonly name: string;
  readonly value: string;
}

/**
 * What conditions are checked against: the request as it arrived (an IncomingMessage is one), read
 * only when a route has conditions, so the route stage allocates nothing for it.
 */
export interface MatchRequest {
  readonly method?: string | undefined;
  readonly headers: IncomingHttpHeaders;
}

/** `query`: the raw query without `?` ('' when none); `secure`: the request's (request/record). */
export function conditionsHold(
  conditions: RouteConditions,
  request: MatchRequest | undefined,
  query: string,
  secure = false,
): boolean {
  if (request === undefined) return false;
  if (conditions.secure != null && conditions.secure !== secure) return false;
  if (conditions.method !== null && request.method !== conditions.method) return false;
  for (const header of conditions.headers) {
    const value = request.headers[header.name];
    const text = Array.isArray(value) ? value.join(',') : value;
    if (text !== header.value) return false;
  }
  if (conditions.query.length > 0) {
    const params = new URLSearchParams(query);
    for (const param of conditions.query) if (params.get(param.name) !== param.value) return false;
  }
  return true;
}

/**
 * `conditions` narrowed to the kinds of Gateway listener a path was attached through: attached only
 * through HTTPS listeners, they hold for secure requests alone; only through HTTP listeners, for
 * plain ones alone; through both, they are left as they are, so a path without match conditions stays
 * unconditional and its lookup one Map read.
 */
export function attachedThrough(
  conditions: RouteConditions | null,
  protocols: readonly ('HTTP' | 'HTTPS')[],
): RouteConditions | null {
  const https = protocols.includes('HTTPS');
  const http = protocols.includes('HTTP');
  if (https === http) return conditions;
  return { ...(conditions ?? { method: null, headers: [], query: [] }), secure: https };
}
