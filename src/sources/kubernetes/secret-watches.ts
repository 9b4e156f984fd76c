import type {
  ConfigurationOptions,
  CoreV1Api,
  KubernetesListObject,
  KubernetesObject,
  V1ConfigMap,
  V1Secret,
} from '@kubernetes/client-node';
import type { ResourceWatch, StartWatch } from './resource-watch.ts';
import type { WatchedResource } from './watch-kinds.ts';

/**
 * The Secrets (and ConfigMaps) a source's objects name (TLS certificates, htpasswd and API keys,
 * upstream TLS, client CA bundles), each
 * followed by its own field-selected watch, so the RBAC a source needs is "get/list/watch the Secrets
 * it names", never every Secret of a namespace (docs/kubernetes.md). Shared by the Ingress and the
 * Gateway API sources; keys are `namespace/name`.
 */
type ListNamed<T extends KubernetesObject> = (
  namespace: string,
  fieldSelector: string,
  callOptions: ConfigurationOptions,
) => Promise<KubernetesListObject<T>>;

class NamedWatches<T extends KubernetesObject> {
  readonly #start: StartWatch;
  readonly #resource: WatchedResource;
  readonly #kind: string;
  readonly #list: ListNamed<T>;
  readonly #entries = new Map<string, { watch: ResourceWatch; secret: T | undefined }>();

  constructor(start: StartWatch, resource: WatchedResource, kind: string, list: ListNamed<T>) {
    this.#start = start;
    this.#resource = resource;
    this.#kind = kind;
    this.#list = list;
  }

  /** Follows exactly `wanted`: a Secret newly named gets a watch, one no longer named loses it. */
  follow(wanted: ReadonlySet<string>): void {
    for (const [key, entry] of this.#entries) {
      if (wanted.has(key)) continue;
      this.#entries.delete(key);
      void entry.watch.stop();
    }
    for (const key of wanted) {
      if (this.#entries.has(key)) continue;
      const [namespace, name] = key.split('/') as [string, string];
      const fieldSelector = `metadata.name=${name}`;
      const entry: { watch?: ResourceWatch; secret: T | undefined } = { secret: undefined };
      entry.watch = this.#start(
        this.#resource,
        `${this.#kind} ${key}`,
        `/api/v1/namespaces/${namespace}/${this.#resource}`,
        (callOptions) => this.#list(namespace, fieldSelector, callOptions),
        (objects) => {
          entry.secret = objects.find((item) => item.metadata?.name === name);
        },
        fieldSelector,
      );
      this.#entries.set(key, entry as { watch: ResourceWatch; secret: T | undefined });
    }
  }

  /** Every followed Secret has been listed once: a translation may conclude one is missing. */
  get synced(): boolean {
    for (const entry of this.#entries.values()) if (!entry.watch.synced) return false;
    return true;
  }

  /** The followed objects that exist, by `namespace/name`. */
  current(): Map<string, T> {
    const secrets = new Map<string, T>();
    for (const [key, entry] of this.#entries) if (entry.secret) secrets.set(key, entry.secret);
    return secrets;
  }

  stop(): Promise<unknown> {
    return Promise.all([...this.#entries.values()].map((entry) => entry.watch.stop()));
  }
}

export class SecretWatches extends NamedWatches<V1Secret> {
  constructor(start: StartWatch, core: CoreV1Api) {
    super(start, 'secrets', 'Secret', (namespace, fieldSelector, callOptions) =>
      core.listNamespacedSecret({ namespace, fieldSelector }, callOptions),
    );
  }
}

/** The same for ConfigMaps a source names (a Gateway's CA certificates: docs/gateway-api.md#client-certificates). */
export class ConfigMapWatches extends NamedWatches<V1ConfigMap> {
  constructor(start: StartWatch, core: CoreV1Api) {
    super(start, 'configmaps', 'ConfigMap', (namespace, fieldSelector, callOptions) =>
      core.listNamespacedConfigMap({ namespace, fieldSelector }, callOptions),
    );
  }
}
