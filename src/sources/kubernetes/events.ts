import { hostname } from 'node:os';
import type { CoreV1Api, KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '../../log.ts';

/** The object an Event is about, as `kubectl describe` finds it. */
export interface EventSubject {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  /** The object as last listed (uid, resourceVersion), when it is still there. */
  stored: KubernetesObject | undefined;
}

/**
 * Records one Kubernetes Event about an object a controller serves (an Ingress, a Gateway API route,
 * a TollgatePolicy): what `kubectl describe` shows its owner (docs/ingress.md, docs/gateway-api.md).
 * A refused write is logged, never thrown: an Event is a courtesy, not part of serving.
 */
export async function recordEvent(
  core: CoreV1Api,
  logger: Logger,
  controller: string,
  subject: EventSubject,
  type: 'Normal' | 'Warning',
  reason: string,
  message: string,
): Promise<void> {
  const { apiVersion, kind, namespace, name, stored } = subject;
  const time = new Date();
  try {
    await core.createNamespacedEvent({
      namespace,
      body: {
        metadata: { generateName: `${name}.`, namespace },
        involvedObject: {
          apiVersion,
          kind,
          name,
          namespace,
          ...(stored?.metadata?.uid === undefined ? {} : { uid: stored.metadata.uid }),
          ...(stored?.metadata?.resourceVersion === undefined
            ? {}
            : { resourceVersion: stored.metadata.resourceVersion }),
        },
        type,
        reason,
        // The API server caps an Event message at 1 KiB.
        message: message.length > 1000 ? `${message.slice(0, 997)}...` : message,
        source: { component: 'tollgate' },
        reportingComponent: controller,
        reportingInstance: hostname(),
        firstTimestamp: time,
        lastTimestamp: time,
        count: 1,
      },
    });
  } catch (error) {
    logger.warn(
      { object: `${kind} ${namespace}/${name}`, error: (error as Error).message?.split('\n', 1)[0] },
      'could not record a Kubernetes Event',
    );
  }
}
