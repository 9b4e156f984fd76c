import type { ErrorCode } from '../errors.ts';

/**
 * What a pipeline stage decides about a request: let it go on (`pass`), or answer it here. Only the
 * shapes live here, beside the request record they decide about; the constructors and `respond`,
 * the one place a decision becomes bytes on the wire, are in pipeline/verdict.ts.
 */
export type Verdict = Pass | Answer | Redirect;

export interface Pass {
  readonly kind: 'pass';
}

export interface Answer {
  readonly kind: 'answer';
  readonly status: number;
  /** An array writes one header line per value (several Set-Cookie relayed from an auth service). */
  readonly headers: Readonly<Record<string, string | readonly string[]>>;
  /** A Buffer when relayed as received (a forward-auth service's login page), else our own text. */
  readonly body: string | Buffer;
  /** The catalogue code when this is one of Tollgate's errors (docs/errors.md). */
  readonly error?: ErrorCode;
  /** A stored representation (the response cache's): a HEAD gets its Content-Type and -Length. */
  readonly representation?: boolean;
}

export interface Redirect {
  readonly kind: 'redirect';
  readonly status: 301 | 302 | 303 | 307 | 308;
  readonly location: string;
  /** Extra headers, e.g. a Set-Cookie that goes with the redirect. */
  readonly headers?: Readonly<Record<string, string>>;
}
