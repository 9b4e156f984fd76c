import { constants } from 'node:os';

/** Exit code of a second signal during a drain: the shell convention 128 + signal number. */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 15);
}

const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT'];

/** The process signals, as `start` sees them: stop (SIGTERM, SIGINT) and reload (SIGHUP). */
export interface ProcessSignals {
  /** The stop signal received so far, or null. */
  readonly stopping: NodeJS.Signals | null;
  /** Called on the first stop signal (at once if one already arrived). */
  onStop(listener: (signal: NodeJS.Signals) => void): void;
  onReload(listener: () => void): void;
  /** Resolves with 128 + signal number when a second stop signal arrives: exit now, drain or not. */
  readonly forcedExit: Promise<number>;
}

/**
 * Installs the signal handlers before any start-up work, so a SIGTERM while the config loads stops
 * the start cleanly instead of killing the process mid-way, and an early SIGHUP is not fatal.
 */
export function captureSignals(): ProcessSignals {
  let stopping: NodeJS.Signals | null = null;
  const stopListeners: Array<(signal: NodeJS.Signals) => void> = [];
  const reloadListeners: Array<() => void> = [];
  let force: (code: number) => void = () => {};
  const forcedExit = new Promise<number>((resolve) => {
    force = resolve;
  });
  for (const signal of STOP_SIGNALS) {
    process.on(signal, () => {
      if (stopping !== null) {
        force(signalExitCode(signal));
        return;
      }
      stopping = signal;
      for (const listener of stopListeners) listener(signal);
    });
  }
  process.on('SIGHUP', () => {
    for (const listener of reloadListeners) listener();
  });
  return {
    get stopping() {
      return stopping;
    },
    onStop(listener) {
      stopListeners.push(listener);
      if (stopping !== null) listener(stopping);
    },
    onReload(listener) {
      reloadListeners.push(listener);
    },
    forcedExit,
  };
}
