/**
 * What the Ingress translation tells each Ingress (build.ts and table.ts write it; backend.ts,
 * canary.ts and the checks add to it; source.ts turns it into logs, Events and
 * tollgate_ingress_rejected): apart, so that the modules filling it need not import the translation.
 */

/** What one Ingress was told: problems make it rejected (tollgate_ingress_rejected = 1). */
export interface IngressReport {
  namespace: string;
  name: string;
  problems: string[];
  warnings: string[];
  /** Warnings with an Event reason of their own (docs/ingress.md#when-something-is-wrong). */
  notices: IngressNotice[];
  /** Some of its paths are served (or closed with 503); false when it was left out entirely. */
  served: boolean;
}

/** A warning that gets its own Event reason; the Ingress is served. */
export interface IngressNotice {
  reason: 'BackendNotFound' | 'WeakPasswordHash' | 'TLSHostNotServed' | 'UpstreamNotVerified';
  message: string;
}
