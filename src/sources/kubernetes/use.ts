import { type ServiceRef, serviceRefText } from '../../config/service-ref.ts';
import type { MainConfig, PathConfig, UpstreamsConfig } from '../../config/types.ts';

// What a config asks of the Kubernetes API, answered without loading the client library: importing
// @kubernetes/client-node costs about 0.5 s of CPU and 75 MB, so a process whose config never
// talks to the API (and `validate`) never loads it; app.ts and workers/primary.ts import the
// provider only when usesKubernetes() says so (docs/architecture.md).

/** True when this config needs the Kubernetes API at all (docs/kubernetes.md). */
export function usesKubernetes(main: MainConfig, upstreams: UpstreamsConfig): boolean {
  return (
    upstreams.provider === 'kubernetes' ||
    Boolean(main.kubernetes?.upstreamsConfigMap) ||
    Boolean(main.kubernetes?.ingressClass) ||
    Boolean(main.kubernetes?.gatewayClass)
  );
}

/**
 * The Services one path names: its `service:`, a canary Ingress's Service (it splits the path with
 * the main one, docs/ingress.md#canary-ingresses) and a RequestMirror's Services (they get the
 * copies, docs/gateway-api.md#mirrors). The one list every watcher of Services reads.
 */
export function pathServiceRefs(path: PathConfig): ServiceRef[] {
  const refs: ServiceRef[] = [];
  if (path.service) refs.push(path.service);
  if (path.canary?.service) refs.push(path.canary.service);
  for (const mirror of path.mirrors ?? []) refs.push(mirror.service);
  return refs;
}

/** Every `service:` reference of a config, once each, in file order. */
export function serviceRefs(config: UpstreamsConfig): ServiceRef[] {
  const seen = new Map<string, ServiceRef>();
  for (const host of config.hosts) {
    for (const path of host.paths) {
      for (const ref of pathServiceRefs(path))
        if (!seen.has(serviceRefText(ref))) seen.set(serviceRefText(ref), ref);
    }
  }
  return [...seen.values()];
}

/** What `validate` prints about the API: which Services and ConfigMap a start would watch. */
export function describeKubernetesUse(main: MainConfig, upstreams: UpstreamsConfig): string[] {
  if (!usesKubernetes(main, upstreams)) return [];
  const namespace = main.kubernetes?.namespace ?? null;
  const where = (ref: ServiceRef) =>
    ref.namespace ?? namespace ?? "the pod's namespace (or the kubeconfig context's, else default)";
  const lines = serviceRefs(upstreams).map(
    (ref) =>
      `would watch EndpointSlices of Service ${ref.name} in ${where(ref)}, port ${typeof ref.port === 'number' ? ref.port : `named '${ref.port}'`}`,
  );
  const ingressClass = main.kubernetes?.ingressClass;
  if (ingressClass)
    lines.push(
      `would serve Ingresses of class ${ingressClass} in ${main.kubernetes?.watchNamespaces?.join(', ') ?? 'every namespace'}`,
    );
  const gatewayClass = main.kubernetes?.gatewayClass;
  if (gatewayClass)
    lines.push(
      main.kubernetes?.gatewayNames
        ? `would serve the Gateways ${main.kubernetes.gatewayNames.join(', ')} of GatewayClass ${gatewayClass} and their routes`
        : `would serve Gateways of GatewayClass ${gatewayClass} and their routes in ${main.kubernetes?.watchNamespaces?.join(', ') ?? 'every namespace'}`,
    );
  const configMap = main.kubernetes?.upstreamsConfigMap;
  if (configMap)
    lines.push(
      `would watch ConfigMap ${configMap} in ${where({ name: '', namespace: null, port: 0 })} for upstreams.yaml`,
    );
  return lines;
}
