import type { CoreV1Api, V1Secret } from '@kubernetes/client-node';
import type { ResourceWatch, StartWatch } from './resource-watch.ts';

/**
 * The Secrets a source's objects name (TLS certificates, htpasswd and API keys, upstream TLS), each
 * followed by its own field-selected watch, so the RBAC a source needs is "get/list/watch the Secrets
 * it names", never every Secret of a namespace (docs/kubernetes.md). Shared by the Ingress and the
 * Gateway API sources; keys are `namespace/name`.
 */
export class SecretWatches {
  readonly #start: StartWatch;
  readonly #core: CoreV1Api;
  readonly #entries = new Map<string, { watch: ResourceWatch; secret: V1Secret | undefined }>();

  constructor(start: StartWatch, core: CoreV1Api) {
    this.#start = start;
    this.#core = core;
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
      const entry: { watch?: ResourceWatch; secret: V1Secret | undefined } = { secret: undefined };
      entry.watch = this.#start(
        'secrets',
        `Secret ${key}`,
        `/api/v1/namespaces/${namespace}/secrets`,
        (callOptions) => this.#core.listNamespacedSecret({ namespace, fieldSelector }, callOptions),
        (objects) => {
          entry.secret = objects.find((item) => item.metadata?.name === name);
        },
        fieldSelector,
      );
      this.#entries.set(key, entry as { watch: ResourceWatch; secret: V1Secret | undefined });
    }
  }

  /** Every followed Secret has been listed once: a translation may conclude one is missing. */
  get synced(): boolean {
    for (const entry of this.#entries.values()) if (!entry.watch.synced) return false;
    return true;
  }

  /** The followed Secrets that exist, by `namespace/name`. */
  current(): Map<string, V1Secret> {
    const secrets = new Map<string, V1Secret>();
    for (const [key, entry] of this.#entries) if (entry.secret) secrets.set(key, entry.secret);
    return secrets;
  }

  stop(): Promise<unknown> {
    return Promise.all([...this.#entries.values()].map((entry) => entry.watch.stop()));
  }
}
