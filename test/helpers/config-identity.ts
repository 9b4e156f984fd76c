import { parseUpstreamsConfig } from '../../src/config/load.ts';
import { compileRoutingTable } from '../../src/routing/compile.ts';

/**
 * The identity Tollgate publishes for an upstreams.yaml text (tollgate_config_info{hash}, /readyz
 * config_hash, log lines): computed the way the proxy does, from the validated config.
 */
export function configIdentityOf(upstreamsYaml: string): string {
  const parsed = parseUpstreamsConfig(upstreamsYaml, 'upstreams.yaml');
  if (!parsed.ok) throw new Error(`not a valid upstreams.yaml: ${JSON.stringify(parsed.issues)}`);
  return compileRoutingTable(parsed.value).hash;
}
