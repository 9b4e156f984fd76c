import type { MainConfig, UpstreamsConfig } from '../config/types.ts';
import { compileRoutingTable } from '../routing/compile.ts';
import type { RoutingTable } from '../routing/types.ts';
import { createMasterkeySource, type MasterkeySource } from '../sources/masterkey.ts';
import { StartError } from '../start-error.ts';

/** A loaded and validated configuration: what config/load returns for main.yaml + upstreams.yaml. */
export interface TollgateConfig {
  main: MainConfig;
  upstreams: UpstreamsConfig;
}

export interface PreparedConfig {
  table: RoutingTable;
  masterkeys: MasterkeySource;
  /** Legal but probably unintended setups, to print or log before serving. */
  warnings: string[];
}

/**
 * What `start` and `validate` share after loading: the compiled table and the masterkey (from
 * masterkey_file or the environment). Throws StartError when either cannot be had.
 */
export function prepareConfig(config: TollgateConfig): PreparedConfig {
  // Validation refused everything compile could trip on (docs/configuration.md), so this cannot fail.
  const table = compileRoutingTable(config.upstreams);
  let masterkeys: MasterkeySource;
  try {
    masterkeys = createMasterkeySource(config.main, config.upstreams);
  } catch (error) {
    throw new StartError(`tollgate: ${(error as Error).message}`);
  }
  const warnings: string[] = [];
  const jwtRoutes = table.routes.filter((route) => route.auth?.type === 'jwt');
  if (jwtRoutes.length > 0 && masterkeys.current() === null) {
    // Fail closed, but say so: with no masterkey every token is refused and no token can be issued.
    warnings.push(
      `no masterkey is configured, so every request to the jwt routes (${jwtRoutes.map((r) => r.id).join(', ')}) ` +
        'will be refused; set masterkey, masterkey_file or TOLLGATE_MASTERKEY',
    );
  }
  return { table, masterkeys, warnings };
}
