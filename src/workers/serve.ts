import type { TollgateConfig } from '../control-plane/prepare.ts';
import type { ProcessSignals } from '../signals.ts';
import { StartError } from '../start-error.ts';
import { createPrimary } from './primary.ts';

/**
 * `tollgate start` with `workers` above 1: this process becomes the primary (docs/workers.md) and
 * resolves with the exit code once every worker has drained. Mirrors the single-process serve in
 * src/cli.ts: SIGHUP reloads, the first stop signal drains, a second one ends everything at once.
 */
export async function serveWorkers(
  config: TollgateConfig,
  signals: ProcessSignals,
  workers: number,
): Promise<number> {
  let primary: ReturnType<typeof createPrimary>;
  try {
    primary = createPrimary(config, { workers });
  } catch (error) {
    if (!(error instanceof StartError)) throw error;
    process.stderr.write(`${error.message}\n`);
    return 1;
  }
  const forced = signals.forcedExit.then((code) => {
    primary.kill();
    return code;
  });
  signals.onReload(() => {
    void primary.reload('SIGHUP');
  });
  try {
    await primary.listen();
  } catch (error) {
    if (!(error instanceof StartError)) throw error;
    process.stderr.write(`${error.message}\n`);
    return 1;
  }
  const stopped = new Promise<number>((resolve) => {
    signals.onStop((signal) => {
      void primary.close(signal).then(resolve);
    });
  });
  return Promise.race([stopped, forced]);
}
