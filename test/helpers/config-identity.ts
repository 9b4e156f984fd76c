import { parseUpstreamsConfig } from '../../src/config/load.ts';
import { compileRoutingTable } from '../../src/routing/compile.ts';
import { waitFor } from './tollgate.ts';

/**
 * The identity Tollgate publishes for an upstreams.yaml text (tollgate_config_info{hash}, /readyz
 * config_hash, log lines): computed the way the proxy does, from the validated config.
 */
export function configIdentityOf(upstreamsYaml: string): string {
  const parsed = parseUpstreamsConfig(upstreamsYaml, 'upstreams.yaml');
  if (!parsed.ok) throw new Error(`not a valid upstreams.yaml: ${JSON.stringify(parsed.issues)}`);
  return compileRoutingTable(parsed.value).hash;
}

/** Resolves once `/readyz` at `adminUrl` reports the identity of `upstreamsYaml` as live. */
export async function waitForLiveConfig(
  adminUrl: string,
  upstreamsYaml: string,
  timeoutMs: number,
): Promise<void> {
  const expected = configIdentityOf(upstreamsYaml);
  await waitFor(async () => {
    const ready = (await (await fetch(`${adminUrl}/readyz`)).json()) as { config_hash?: string };
    return ready.config_hash === expected;
  }, timeoutMs);
}
