import type { ForwardPlan, RoutedRequest } from './record.ts';

/**
 * The request target as the client asked for it: the normalised path and the query without the token
 * parameters (docs/authentication.md#jwt). What an auth service, ext_authz, the cache key and a
 * sign-in link see.
 */
export function requestTarget(
  request: Pick<RoutedRequest, 'path'> & Pick<ForwardPlan, 'forwardQuery'>,
): string {
  return request.forwardQuery === '' ? request.path : `${request.path}?${request.forwardQuery}`;
}

/** The request target sent upstream: the path after any rewrite (docs/policies.md#rewrite), the same query. */
export function upstreamTarget(request: Pick<ForwardPlan, 'upstreamPath' | 'forwardQuery'>): string {
  return request.forwardQuery === ''
    ? request.upstreamPath
    : `${request.upstreamPath}?${request.forwardQuery}`;
}
