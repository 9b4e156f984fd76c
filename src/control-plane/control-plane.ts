import type http from 'node:http';
import { type AdminSources, createAdminServer, processSources } from '../admin/server.ts';
import { createTokenApiServer } from '../api/server.ts';
import { type Clock, systemClock } from '../auth/clock.ts';
import type { ListenAddress } from '../config/types.ts';
import { applyListenerLimits, listenOn } from '../listener-limits.ts';
import { createLogger, type Logger } from '../log.ts';
import type { ConfigSnapshot } from '../snapshot.ts';
import { createUpstreamsApplier } from '../sources/apply-upstreams.ts';
import type { FileWatcher } from '../sources/files.ts';
import type { KubernetesProvider } from '../sources/kubernetes/provider.ts';
import { usesKubernetes } from '../sources/kubernetes/use.ts';
import type { MasterkeySource } from '../sources/masterkey.ts';
import { type RuntimeFiles, watchRuntimeFiles } from '../sources/runtime-files.ts';
import { StartError } from '../start-error.ts';
import { startKubernetes } from './kubernetes.ts';
import { createLiveConfig, type LiveConfig } from './live-config.ts';
import { prepareConfig, type TollgateConfig } from './prepare.ts';

export interface ControlPlaneOptions {
  /** Defaults to a JSON logger on stdout at main.yaml's `log_level`. */
  logger?: Logger | undefined;
  /** Token clock (seconds since the epoch) of the token API; the system clock by default. */
  clock?: Clock | undefined;
  /** Watch the files read at runtime (docs/reload.md) once started (default true). */
  watch?: boolean | undefined;
  /** What the admin port reports: this process by default, a primary's workers (docs/workers.md). */
  admin?: (liveConfig: LiveConfig) => AdminSources;
}

/**
 * Everything that must be one per Tollgate (docs/architecture.md): the config sources (files, the
 * Kubernetes API), the admin listener, the token API and readiness. It serves no proxy request; it
 * produces configuration snapshots for the data plane(s).
 */
export interface ControlPlane {
  readonly logger: Logger;
  readonly liveConfig: LiveConfig;
  readonly adminServer: http.Server;
  readonly tokenApiServer: http.Server;
  /** The snapshot served now. */
  snapshot(): ConfigSnapshot;
  /** Called with every new snapshot (a reload, a ConfigMap, an endpoint change, a new masterkey). */
  onSnapshot(listener: (snapshot: ConfigSnapshot) => void): void;
  /** Binds the admin listener, then the token API. */
  listen(): Promise<{ admin: ListenAddress; api: ListenAddress }>;
  /** Starts the Kubernetes provider when the config uses the API; `ownListeners` are never endpoints. */
  startKubernetes(ownListeners: () => readonly ListenAddress[]): Promise<void>;
  /**
   * Watches the config files (unless `watch: false`) and gives the provider its apply path.
   * Resolves with the watcher the data plane registers its own files with (null when not watching).
   */
  watchSources(): Promise<FileWatcher | null>;
  /** Readiness on once every source delivered its first state (docs/kubernetes.md); calls `announce`. */
  readyWhenSynced(addresses: Record<string, string>, announce: () => void): void;
  /** Checks the config files now (what SIGHUP does) and resolves once the check is done. */
  reload(reason: string): Promise<void>;
  /** Stops the sources (file watches, Kubernetes watches): a shutdown's cleanup steps. */
  readonly cleanup: ReadonlyArray<() => unknown>;
}

export function createControlPlane(config: TollgateConfig, options: ControlPlaneOptions = {}): ControlPlane {
  const { main } = config;
  const prepared = prepareConfig(config);
  const logger = options.logger ?? createLogger(main.logLevel);
  for (const warning of prepared.warnings) logger.warn(warning);
  const liveConfig = createLiveConfig({
    main,
    logger,
    table: prepared.table,
    upstreams: config.upstreams,
    masterkey: () => prepared.masterkeys.current(),
  });
  // A rotated masterkey_file is applied here first (token API), then sent out with the same table.
  const masterkeys: MasterkeySource = {
    ...prepared.masterkeys,
    replaceFileKey(key) {
      prepared.masterkeys.replaceFileKey(key);
      liveConfig.publish(liveConfig.table());
    },
  };
  const adminServer = createAdminServer(options.admin?.(liveConfig) ?? processSources(liveConfig));
  const tokenApiServer = createTokenApiServer({
    main,
    masterkey: masterkeys.current,
    logger,
    now: options.clock ?? systemClock,
  });
  applyListenerLimits(main, { tokenApiServer, adminServer });

  let kubernetes: KubernetesProvider | null = null;
  let runtimeFiles: RuntimeFiles | null = null;

  return {
    logger,
    liveConfig,
    adminServer,
    tokenApiServer,
    snapshot: () => liveConfig.snapshot(),
    onSnapshot: (listener) => liveConfig.onSnapshot((next) => listener(next)),
    async listen() {
      const admin = await listenOn(adminServer, main.adminAddress, 'admin_address');
      const api = await listenOn(tokenApiServer, main.configAddress, 'config_address');
      return { admin, api };
    },
    async startKubernetes(ownListeners) {
      if (!usesKubernetes(main, config.upstreams)) return;
      kubernetes = await startKubernetes(liveConfig, config.upstreams, logger, ownListeners);
    },
    async watchSources() {
      const provider = kubernetes;
      const hooks = provider
        ? {
            compile: provider.compile,
            onReloaded: (_: unknown, next: typeof config.upstreams) => provider.configApplied(next),
          }
        : undefined;
      if (options.watch !== false) {
        // One watcher for every file read at runtime: upstreams.yaml, main.yaml, masterkey_file, …
        runtimeFiles = await watchRuntimeFiles({
          liveConfig,
          logger,
          masterkeys,
          compileUpstreams: hooks?.compile,
          onUpstreamsReloaded: hooks?.onReloaded,
          // A ConfigMap read through the API replaces the file, which then only served the start.
          watchUpstreamsFile: !main.kubernetes?.upstreamsConfigMap,
        }).catch((error: Error) => {
          throw new StartError(`tollgate: ${error.message}`);
        });
      }
      provider?.attach(
        runtimeFiles?.upstreams ??
          createUpstreamsApplier({
            liveConfig,
            logger,
            beforeSwap: (next) => masterkeys.reload(next),
            ...hooks,
          }),
      );
      return runtimeFiles?.files ?? null;
    },
    readyWhenSynced(addresses, announce) {
      const ready = () => {
        liveConfig.phase = 'ready';
        announce();
      };
      const provider = kubernetes;
      if (provider === null || provider.synced()) return ready();
      // Readiness waits for the first list of every watch (docs/kubernetes.md); serving does not.
      // The listeners already serve: say where, so the ports are known before readiness.
      logger.info({ addresses }, 'waiting for the first Kubernetes sync before reporting ready');
      void provider.whenSynced().then(() => {
        if (liveConfig.phase === 'starting') ready();
      });
    },
    async reload(reason) {
      const files = runtimeFiles;
      if (files === null) return;
      files.trigger(reason);
      await files.settled();
    },
    cleanup: [() => runtimeFiles?.close(), () => kubernetes?.close()],
  };
}
