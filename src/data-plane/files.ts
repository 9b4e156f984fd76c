import { type LoadedRevocations, watchRevokedTokens } from '../auth/revocation.ts';
import type { Logger } from '../log.ts';
import { concernChanges } from '../routing/table-change.ts';
import type { Route, RoutingTable } from '../routing/types.ts';
import type { Runtime } from '../runtime.ts';
import type { Snapshot } from '../snapshot.ts';
import type { FileWatcher } from '../sources/files.ts';
import type { TlsContextProvider } from '../sources/tls-certificate.ts';
import type { UpstreamPools } from '../upstream/pools.ts';

/**
 * The files the data plane's requests read, each applied on its own when it changes (docs/reload.md):
 * the TLS listener's certificate and key, the upstream TLS files the live routes name (followed as
 * the table changes), and revoked_tokens_file.
 */
export async function watchDataFiles(options: {
  files: FileWatcher;
  runtime: Runtime;
  pools: UpstreamPools;
  tls: TlsContextProvider | null;
  revokedTokensFile: string | null;
  revocations: LoadedRevocations;
  logger: Logger;
}): Promise<void> {
  const { files, runtime, pools, logger } = options;
  await options.tls?.watch(files);
  let following: Promise<void> = pools.tlsFiles.follow(files, runtime.table(), logger);
  await following;
  runtime.onTableSwap((next) => {
    following = following.then(() => pools.tlsFiles.follow(files, next, logger));
  });
  if (options.revokedTokensFile) {
    await watchRevokedTokens(files, options.revokedTokensFile, options.revocations, logger);
  }
}

/**
 * Whether two snapshots' certificates are the same pairs: most snapshots (endpoint changes) bring
 * the same ones, and rebuilding the SNI set for them would hash every pair again.
 */
export function sameCertificates(a: Snapshot['certificates'], b: Snapshot['certificates']): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  return a.every((item, i) => {
    const other = b[i];
    return (
      other !== undefined &&
      item.certificate === other.certificate &&
      item.key === other.key &&
      (item.names === other.names || item.names.join('\n') === other.names.join('\n')) &&
      (item.clientCertificates === other.clientCertificates ||
        JSON.stringify(item.clientCertificates ?? null) === JSON.stringify(other.clientCertificates ?? null))
    );
  });
}

/**
 * `verify: false` is never silent (docs/traffic.md#tls-to-upstreams): every route dialling a server
 * without checking its certificate is named at start and on each reload, once per set of routes
 * (Kubernetes endpoint changes swap the table often).
 */
export function unverifiedUpstreamsLog(logger: Logger): (table: RoutingTable) => void {
  let logged = '';
  const unverifiedMayChange = concernChanges(unverified);
  return (table) => {
    // The same routes unverified, in the same order: the set logged is the same.
    if (!unverifiedMayChange(table)) return;
    const routes = table.routes.filter(unverified).map((route) => route.id);
    const key = routes.join('\n');
    if (key === logged) return;
    logged = key;
    if (routes.length === 0) return;
    logger.warn(
      { routes },
      'upstream_tls verify: false: these routes do not check their upstream certificates',
    );
  };
}

/** The route dials a server of its own without checking its certificate (mirrors are not named). */
function unverified(route: Route): boolean {
  return route.servers.some((server) => server.transport.tls?.verify === false);
}
