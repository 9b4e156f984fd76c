import type { ReachesTollgate } from './auth-url-guard.ts';

/**
 * What a policy reader may ask of the source it reads for (docs/architecture.md, one policy model).
 * Each source fills in what it has: upstreams.yaml its files, a Kubernetes source its Secrets and
 * Tollgate's own ports.
 */
export interface PolicyContext {
  /**
   * Files of Tollgate's own host or pod (`jwks_file`, `grpc.tls.ca_file`), read now so a broken one
   * is reported at its key. Absent: a policy may not name a file (a Kubernetes object's author is
   * not the operator).
   */
  files?: {
    jwks(value: string): FileOutcome;
    caBundle(value: string): FileOutcome;
  };
  /** Set for a Kubernetes source: credentials come from Secrets, service URLs are guarded. */
  kubernetes?: KubernetesContext;
  /**
   * The names of main.yaml's `oidc_providers`: a `type: oidc` must name one. Absent: checked later
   * (upstreams.yaml: with both files, config/validate-oidc checkOidcReferences).
   */
  oidcProviders?: readonly string[] | undefined;
}

export interface KubernetesContext {
  /**
   * A Secret by reference: its decoded data and what messages call it (`auth Secret apps/users`), or
   * why it cannot be read (missing, another namespace, no ReferenceGrant).
   */
  secret(ref: SecretRef): { data: Record<string, string>; name: string } | { problem: string };
  /** Tollgate's own listeners, which an auth service URL may not target (absent: not checked). */
  reachesTollgate?: ReachesTollgate | undefined;
}

export interface SecretRef {
  name: string;
  namespace?: string;
}

export type FileOutcome = { path: string } | { problem: string };
