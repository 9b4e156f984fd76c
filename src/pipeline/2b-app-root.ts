import type { StageRequest } from '../request/record.ts';
import type { Verdict } from '../request/verdict.ts';
import { PASS, redirect } from './verdict.ts';

/**
 * An Ingress's `app-root` (docs/policies.md#app-root): a request for `/` is sent to the application's
 * root with 302, query kept, before rate limits and authentication (as ingress-nginx does). Any
 * other path goes on untouched.
 */
export function appRootStage(request: StageRequest): Verdict {
  const root = request.route.policy?.appRoot;
  if (root == null || request.path !== '/') return PASS;
  return redirect(302, request.query === '' ? root : `${root}?${request.query}`);
}
