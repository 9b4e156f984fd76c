import { processSources } from './admin/server.ts';
import type { Clock } from './auth/clock.ts';
import type { ListenAddress } from './config/types.ts';
import { createControlPlane } from './control-plane/control-plane.ts';
import type { TollgateConfig } from './control-plane/prepare.ts';
import { createDataPlane } from './data-plane/data-plane.ts';
import { createLifecycle, startOrRelease } from './lifecycle.ts';
import { boundAddressesField } from './listen.ts';
import type { Logger } from './log.ts';

export interface TollgateOptions {
  /** Token clock (seconds since the epoch); the system clock by default. */
  clock?: Clock | undefined;
  /** Defaults to a JSON logger on stdout at main.yaml's `log_level`. */
  logger?: Logger;
  /** Watch the files read at runtime (docs/reload.md) once listening (default true). */
  watch?: boolean | undefined;
}

/** Where each listener is actually bound (port 0 in main.yaml becomes the port the kernel chose). */
export interface BoundAddresses {
  proxy: ListenAddress;
  proxyTls: ListenAddress | null;
  api: ListenAddress;
  admin: ListenAddress;
}

export interface Tollgate {
  readonly logger: Logger;
  /** Binds every listener, starts watching the config files, turns readiness on. */
  listen(): Promise<BoundAddresses>;
  /** The bound addresses; throws before listen() resolved. */
  addresses(): BoundAddresses;
  /** Checks the config files now (what SIGHUP does) and resolves once the check is done. */
  reload(reason?: string): Promise<void>;
  /**
   * The graceful shutdown (docs/reload.md): readiness off, `shutdown_delay_seconds` of serving,
   * stop accepting, drain in-flight requests for up to `shutdown_grace_seconds`, release everything.
   * Calling it again returns the same promise.
   */
  close(reason?: string): Promise<void>;
  /** Removes this process's cached responses of a host key under a path prefix (docs/traffic.md#response-cache). */
  purgeCache(hostKey: string, prefix: string): number;
}

/**
 * One Tollgate in one process (docs/architecture.md): a control plane (config sources, admin
 * listener, token API, readiness) whose snapshots a data plane (proxy listeners, pipeline,
 * upstreams) applies. Nothing is bound until listen(), and nothing here touches
 * process-wide state (signals, exit codes, argv): that is src/cli.ts's job. With `workers` above 1,
 * workers/primary.ts wires the control plane and workers/worker.ts a data plane per process.
 */
export function createTollgate(config: TollgateConfig, options: TollgateOptions = {}): Tollgate {
  const { main } = config;
  const control = createControlPlane(config, {
    ...options,
    admin: (liveConfig) => ({
      ...processSources(liveConfig),
      purgeCache: async (hostKey, prefix) => ({ purged: data.purgeCache(hostKey, prefix) }),
    }),
  });
  const { logger } = control;
  const data = createDataPlane(main, { logger, clock: options.clock, initial: control.snapshot() });
  control.onSnapshot(data.applySnapshot);
  const lifecycle = createLifecycle({
    runtime: control.liveConfig,
    main,
    logger,
    servers: [...data.drainable, control.tokenApiServer],
    keepUntilExit: [control.adminServer],
    cleanup: [...control.cleanup, ...data.cleanup],
  });

  let bound: BoundAddresses | null = null;
  let closing: Promise<void> | null = null;
  const close = (reason = 'close') => {
    closing ??= lifecycle.shutdown(reason);
    return closing;
  };

  return {
    logger,
    async listen() {
      const addresses = await startOrRelease(lifecycle, close, async () => {
        await data.ready();
        const { admin, api } = await control.listen();
        const own: BoundAddresses = { admin, api, ...(await data.listen()) };
        bound = own;
        await control.startKubernetes(() => [
          own.proxy,
          own.api,
          own.admin,
          ...(own.proxyTls ? [own.proxyTls] : []),
        ]);
        // One watcher for every file read at runtime: the control plane's, then the data plane's.
        const files = await control.watchSources();
        if (files) await data.watchFiles(files);
        return own;
      });
      const boundAddresses = boundAddressesField(addresses);
      control.readyWhenSynced(boundAddresses, () => {
        const table = data.runtime.table();
        logger.info(
          { hash: table.hash, routes: table.routes.length, addresses: boundAddresses },
          'tollgate ready',
        );
      });
      return addresses;
    },
    addresses() {
      if (bound === null) throw new Error('tollgate is not listening yet');
      return bound;
    },
    reload: (reason = 'manual') => control.reload(reason),
    close,
    purgeCache: (hostKey, prefix) => data.purgeCache(hostKey, prefix),
  };
}
