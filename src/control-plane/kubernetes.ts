import type { ListenAddress, UpstreamsConfig } from '../config/types.ts';
import type { Logger } from '../log.ts';
import type { Runtime } from '../runtime.ts';
import type { KubernetesProvider } from '../sources/kubernetes/provider.ts';
import { StartError } from '../start-error.ts';
import type { LiveConfig } from './live-config.ts';

/**
 * Starts the Kubernetes provider (docs/kubernetes.md) as one more source of the control plane: its
 * rebuilds (endpoint and route changes) are published as snapshots like a reloaded file, and every
 * snapshot carries the merged config, the endpoints and the Ingress/Gateway certificates it knows.
 */
export async function startKubernetes(
  liveConfig: LiveConfig,
  initial: UpstreamsConfig,
  logger: Logger,
  ownListeners: () => readonly ListenAddress[],
): Promise<KubernetesProvider> {
  // Loaded only here: the client library is heavy (sources/kubernetes/use.ts).
  const { startKubernetesProvider } = await import('../sources/kubernetes/provider.ts');
  let provider: KubernetesProvider;
  try {
    provider = startKubernetesProvider({
      main: liveConfig.main,
      initial,
      runtime: providerView(liveConfig),
      logger,
      ownListeners,
      // The certificates travel in the snapshots; each data plane puts them in its own SNI store.
      certificates: null,
    });
  } catch (error) {
    throw new StartError(`tollgate: kubernetes: ${(error as Error).message}`);
  }
  liveConfig.follow({
    effective: provider.effective,
    certificates: provider.certificates,
    endpointsOf: provider.endpointsOf,
  });
  return provider;
}

/**
 * The provider's own signature takes a Runtime; here its table is the live config's, and its
 * swapTable (a rebuild after an endpoint or route change) publishes a snapshot.
 */
function providerView(liveConfig: LiveConfig): Runtime {
  return {
    main: liveConfig.main,
    logger: liveConfig.logger,
    get phase() {
      return liveConfig.phase;
    },
    set phase(phase) {
      liveConfig.phase = phase;
    },
    table: () => liveConfig.table(),
    swapTable: (next) => liveConfig.publish(next),
    onTableSwap: (listener) =>
      liveConfig.onSnapshot((next, previous) => listener(next.table, previous.table)),
  };
}
