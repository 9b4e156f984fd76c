import * as client from 'openid-client';
import { oidcProviderProblem, oidcProviderUp } from '../../observe/metrics.ts';

/**
 * Why a provider's discovery failed, in a few words an operator acts on (docs/observability.md#the-status-page):
 * a bounded set, so it can be a metric label and a line on /status.
 */
export type ProviderProblem =
  | 'unreachable'
  | 'timeout'
  | 'tls'
  | 'http_error'
  | 'bad_metadata'
  | 'client_secret'
  | 'ca_file';

/** Node and undici error codes of a failed TLS handshake or certificate check. */
const TLS_CODE = /CERT|SSL|TLS|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER/;
const TIMEOUT_CODE = /TIMEOUT|ETIMEDOUT/;

/** The problem a discovery error shows (openid-client / oauth4webapi errors, fetch's TypeError and its cause). */
export function discoveryProblem(error: unknown): ProviderProblem {
  if (!(error instanceof Error)) return 'bad_metadata';
  if (error.name === 'TimeoutError' || error.name === 'AbortError') return 'timeout';
  const cause = (error as { cause?: unknown }).cause;
  const code = codeOf(cause) ?? codeOf(error) ?? '';
  if (TLS_CODE.test(code)) return 'tls';
  if (TIMEOUT_CODE.test(code)) return 'timeout';
  if (error instanceof TypeError && error.message === 'fetch failed') return 'unreachable';
  if (error instanceof client.ResponseBodyError) return 'http_error';
  if (code === 'OAUTH_RESPONSE_IS_NOT_CONFORM' && /HTTP status code/.test(error.message)) return 'http_error';
  return 'bad_metadata';
}

function codeOf(value: unknown): string | null {
  if (typeof value !== 'object' || value === null) return null;
  const code = (value as { code?: unknown }).code;
  return typeof code === 'string' ? code : null;
}

/**
 * One provider's health as metrics (`tollgate_oidc_provider_up`, `tollgate_oidc_provider_problem`),
 * which /status reads: whether its routes can serve, and what the last failed discovery said.
 */
export function createProviderHealth(provider: string) {
  let shown: ProviderProblem | null = null;
  const showProblem = (problem: ProviderProblem | null) => {
    if (problem === shown) return;
    if (shown !== null) oidcProviderProblem.remove({ provider, problem: shown });
    if (problem !== null) oidcProviderProblem.set({ provider, problem }, 1);
    shown = problem;
  };
  return {
    discovered(): void {
      oidcProviderUp.set({ provider }, 1);
      showProblem(null);
    },
    /** `usable`: metadata from an earlier discovery still serves the routes. */
    failed(problem: ProviderProblem, usable: boolean): void {
      oidcProviderUp.set({ provider }, usable ? 1 : 0);
      showProblem(problem);
    },
  };
}
