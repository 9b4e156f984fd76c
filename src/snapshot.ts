import type { UpstreamsConfig } from './config/types.ts';
import type { EndpointLookup } from './routing/compile.ts';
import type { RoutingTable } from './routing/types.ts';
import type { CertificatePem } from './sources/kubernetes/ingress/certificates.ts';

/**
 * What a data plane needs to serve one configuration (docs/architecture.md): the compiled table, the masterkey tokens are checked with, and the TLS certificates
 * the Kubernetes sources add to the SNI store. Applied whole by `applySnapshot`, never edited.
 */
export interface Snapshot {
  readonly table: RoutingTable;
  readonly masterkey: string | null;
  /** TLS certificates from the Secrets Ingresses and Gateways name, served by SNI beside main.yaml's. */
  readonly certificates: readonly CertificatePem[];
}

/**
 * What the control plane emits: a Snapshot plus what it was compiled from, so a worker (which is
 * sent no table, only data) compiles the same table (compile is pure).
 */
export interface ConfigSnapshot extends Snapshot {
  /** upstreams.yaml with the Ingress and Gateway API routes merged in: what `table` was compiled from. */
  readonly upstreams: UpstreamsConfig;
  /** The ready servers of each `service:` reference of `upstreams`, as compiled into `table`. */
  readonly endpointsOf: EndpointLookup;
}
