import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { type Cluster, KubeConfig } from '@kubernetes/client-node';
import type { Dispatcher } from 'undici';
import { checkKubeconfigFile } from '../../config/file-checks.ts';

/** Where a pod finds its service account: token, CA and namespace (projected by the kubelet). */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface KubeConnection {
  readonly kubeConfig: KubeConfig;
  /** The namespace `service:` references without one, and the ConfigMap, live in. */
  readonly namespace: string;
  /** How the credentials were found, for the startup log line (never the credentials). */
  readonly origin: string;
}

export interface KubeConnectionOptions {
  /** main.yaml `kubernetes.kubeconfig`. */
  kubeconfig?: string | null | undefined;
  /** main.yaml `kubernetes.namespace`. */
  namespace?: string | null | undefined;
  env?: NodeJS.ProcessEnv;
  /**
   * Prefix before SERVICE_ACCOUNT_DIR, as the client library's in-cluster loader takes it; lets a
   * test lay out a service-account directory under a temporary root.
   */
  inClusterRoot?: string;
}

/**
 * Finds credentials: an explicit kubeconfig (main.yaml) wins, then the pod's own service account,
 * then `$KUBECONFIG`, then `~/.kube/config`. In a pod the service account comes before `$KUBECONFIG`
 * so that an image or a shell profile that happens to set it cannot point a deployed proxy at
 * another cluster; the explicit key is the way to do that on purpose (docs/kubernetes.md).
 *
 * In-cluster, the client library's token-file authenticator re-reads the projected token at most a
 * minute after the kubelet rotates it (the kubelet rotates at 80% of the token's life, and the old
 * token stays valid until it expires, so a minute is always in time). See docs/kubernetes.md.
 */
export function connectKube(options: KubeConnectionOptions = {}): KubeConnection {
  const env = options.env ?? process.env;
  const root = options.inClusterRoot ?? '';
  const kubeConfig = new KubeConfig();
  let origin: string;
  let inCluster = false;
  const kubeconfigFiles = options.kubeconfig
    ? [options.kubeconfig]
    : (env.KUBECONFIG ?? '').split(':').filter((file) => file !== '');
  const podAccount = env.KUBERNETES_SERVICE_HOST && existsSync(`${root}${SERVICE_ACCOUNT_DIR}/token`);
  if (!options.kubeconfig && podAccount) {
    kubeConfig.loadFromCluster(root);
    origin = 'in-cluster service account';
    inCluster = true;
  } else if (kubeconfigFiles.length > 0) {
    // main.yaml's file, with the words `validate` used for it (config/file-checks).
    if (options.kubeconfig) checkKubeconfigFile(options.kubeconfig);
    for (const file of kubeconfigFiles) {
      if (!existsSync(file)) throw new Error(`kubeconfig ${file} does not exist`);
    }
    kubeConfig.loadFromFile(kubeconfigFiles[0] as string);
    for (const file of kubeconfigFiles.slice(1)) {
      const more = new KubeConfig();
      more.loadFromFile(file);
      kubeConfig.mergeConfig(more, true);
    }
    origin = options.kubeconfig
      ? `kubeconfig ${options.kubeconfig}`
      : `$KUBECONFIG (${kubeconfigFiles.join(':')})`;
  } else if (existsSync(join(homedir(), '.kube', 'config'))) {
    kubeConfig.loadFromFile(join(homedir(), '.kube', 'config'));
    origin = 'kubeconfig ~/.kube/config';
  } else {
    throw new Error(
      'no Kubernetes credentials: not in a pod (no service account token) and no kubeconfig ' +
        '(set kubernetes.kubeconfig in main.yaml or $KUBECONFIG)',
    );
  }
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error(`${origin}: the current context names no cluster`);
  shareConnections(kubeConfig);
  return { kubeConfig, namespace: chooseNamespace(options.namespace, kubeConfig, inCluster, root), origin };
}

function chooseNamespace(
  configured: string | null | undefined,
  kubeConfig: KubeConfig,
  inCluster: boolean,
  root: string,
): string {
  if (configured) return configured;
  if (inCluster) {
    const file = `${root}${SERVICE_ACCOUNT_DIR}/namespace`;
    if (existsSync(file)) {
      const namespace = readFileSync(file, 'utf8').trim();
      if (namespace) return namespace;
    }
  }
  return kubeConfig.getContextObject(kubeConfig.getCurrentContext())?.namespace || 'default';
}

/** The library's per-request dispatcher factory (a private method of client-node 2.x's KubeConfig). */
type DispatcherFactory = (cluster: Cluster | null, agentOptions: object) => Dispatcher | undefined;

/**
 * One connection pool to the API server for every request, instead of client-node's new undici Agent
 * per request (a new TLS connection, with a new secure context, for each list, watch and status
 * write: most of the control plane's CPU at a few thousand objects, docs/benchmark.md). The pool is
 * keyed by the request's TLS options (CA, client certificate, key, server name, proxy), which the
 * library reads again for each request: a rotated client certificate or CA gets a new pool, and the
 * old one is closed once its requests are done. Without the factory (another library version) each
 * request keeps its own connection, as the library does.
 */
export function shareConnections(kubeConfig: KubeConfig): void {
  const target = kubeConfig as unknown as { createDispatcher?: DispatcherFactory };
  const original = target.createDispatcher;
  if (typeof original !== 'function') return;
  let shared: { key: string; dispatcher: Dispatcher | undefined } | null = null;
  target.createDispatcher = (cluster, agentOptions) => {
    const key = JSON.stringify(
      kubeConfig.createDispatcherOptions(cluster, agentOptions),
      (_name, value: unknown) =>
        value !== null && typeof value === 'object' && (value as { type?: unknown }).type === 'Buffer'
          ? Buffer.from((value as { data: number[] }).data).toString('base64')
          : value,
    );
    if (shared?.key === key) return shared.dispatcher;
    const previous = shared?.dispatcher;
    shared = { key, dispatcher: original.call(kubeConfig, cluster, agentOptions) };
    void previous?.close().catch(() => {});
    return shared.dispatcher;
  };
}
