import type { CoreV1Api, V1Service } from '@kubernetes/client-node';
import type { KubernetesSettings } from '../../config/types.ts';
import type { ResourceWatch, StartWatch } from './resource-watch.ts';

/**
 * The addresses a controller announces in its objects' status (Ingress `status.loadBalancer`,
 * Gateway `status.addresses`): `publish_address` as written, else the `publish_service`'s load
 * balancer IPs and host names, else its cluster IP (docs/kubernetes.md). Shared by the Ingress and
 * Gateway API sources, each writing them in its own shape.
 */
export interface PublishedAddresses {
  /** The watch of the publish_service, for the source's list of watches; null without one. */
  readonly watch: ResourceWatch | null;
  /** The addresses now, or null when there are none to announce yet (status is then left alone). */
  current(): string[] | null;
}

export function followPublishedAddresses(
  settings: Pick<KubernetesSettings, 'publishService' | 'publishAddress'>,
  start: StartWatch,
  core: CoreV1Api,
): PublishedAddresses {
  const publish = settings.publishService ?? null;
  let service: V1Service | undefined;
  let watch: ResourceWatch | null = null;
  if (publish) {
    const fieldSelector = `metadata.name=${publish.name}`;
    watch = start<V1Service>(
      'services',
      `Service ${publish.namespace}/${publish.name} (publish_service)`,
      `/api/v1/namespaces/${publish.namespace}/services`,
      (o) => core.listNamespacedService({ namespace: publish.namespace, fieldSelector }, o),
      (objects) => {
        service = objects.find((item) => item.metadata?.name === publish.name);
      },
      fieldSelector,
    );
  }
  return {
    watch,
    current() {
      if (settings.publishAddress) return [...settings.publishAddress];
      if (service === undefined) return null;
      const balancer = (service.status?.loadBalancer?.ingress ?? [])
        .map((entry) => entry.ip ?? entry.hostname ?? '')
        .filter((address) => address !== '');
      if (balancer.length > 0) return balancer;
      const clusterIp = service.spec?.clusterIP;
      return clusterIp && clusterIp !== 'None' ? [clusterIp] : null;
    },
  };
}

/** An IP literal (v4 dotted, or anything with a colon: v6), as opposed to a host name. */
export function isIpAddress(address: string): boolean {
  return /^[0-9.]+$/.test(address) || address.includes(':');
}
