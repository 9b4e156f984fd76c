import type { PathConfig } from './types.ts';

/** Every field of a path but its key. */
export type PathFields = Omit<PathConfig, 'prefix'>;

/**
 * The one place a PathConfig is built from scratch: `fields` as given, every other field at its
 * "none" (no servers, prefix matching, no policy, `upstream_protocol: auto`). Every field of
 * PathConfig is required, so a new one gets its "none" here once, and the compiler points at any
 * other literal that forgot it. Copies of an existing path (`{ ...path, x }`) need not come here.
 */
export function pathConfig(prefix: string, fields: Partial<PathFields> = {}): PathConfig {
  return {
    prefix,
    servers: [],
    service: null,
    toHttps: false,
    authorization: null,
    rateLimit: null,
    healthCheck: null,
    exact: false,
    unavailable: null,
    stickySessions: null,
    origin: null,
    requestHeaders: null,
    responseHeaders: null,
    redirectTo: null,
    authFailureLimit: null,
    upstreamTls: null,
    upstreamProtocol: 'auto',
    policies: null,
    timeouts: null,
    upstreamHost: null,
    redirect: null,
    canary: null,
    conditions: null,
    backendError: null,
    backendErrorShare: null,
    requestRedirect: null,
    retry: null,
    mirrors: null,
    ...fields,
  };
}
