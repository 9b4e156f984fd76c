import type { MainConfig } from './config/types.ts';
import type { Logger } from './log.ts';
import type { RoutingTable } from './routing/types.ts';

export type Phase = 'starting' | 'ready' | 'draining';

/**
 * A data plane's mutable state, kept to the minimum: the current routing table (swapped whole,
 * never edited, by the data plane's applySnapshot alone) and the lifecycle phase. Everything else
 * is derived from these or is immutable configuration.
 */
export interface Runtime {
  readonly main: MainConfig;
  readonly logger: Logger;
  phase: Phase;
  /** The live table. A request calls this once, at arrival, and keeps the reference. */
  table(): RoutingTable;
  swapTable(next: RoutingTable): void;
  /** Called after every swap with the new and previous tables (pools, health checks, metrics). */
  onTableSwap(listener: (next: RoutingTable, previous: RoutingTable) => void): void;
}

export function createRuntime(main: MainConfig, logger: Logger, initial: RoutingTable): Runtime {
  let current = initial;
  const listeners: Array<(next: RoutingTable, previous: RoutingTable) => void> = [];
  return {
    main,
    logger,
    phase: 'starting',
    table: () => current,
    swapTable(next) {
      const previous = current;
      current = next;
      for (const listener of listeners) listener(next, previous);
    },
    onTableSwap(listener) {
      listeners.push(listener);
    },
  };
}
