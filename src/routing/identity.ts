import { createHash } from 'node:crypto';
import { pathConfig } from '../config/path-config.ts';
import type { PathConfig, UpstreamsConfig } from '../config/types.ts';

/**
 * The config identity published as `tollgate_config_info{hash}`, in `/readyz` and in the ready and
 * reload log lines (docs/configuration.md, "Config identity"). It tells operators whether replicas
 * serve the same upstreams.yaml, and reveals nothing about the secrets in it: a plain hash of the
 * file lets anyone who can scrape the metrics check password and key guesses offline.
 *
 * SHA-256 over the validated config in canonical form (normalised hosts and prefixes, sorted object
 * keys) with every secret value replaced by a marker. Names (users, API key names) count; secret
 * values do not, so a password rotated alone keeps the identity (the reload still shows in
 * `tollgate_config_last_reload_success_timestamp_seconds`). Any deterministic function of a secret
 * would be a guessing oracle unless keyed by another secret, and keying it (say, by the masterkey)
 * would tie the identity to a key that rotates on its own and that every compile path (file reload,
 * ConfigMap, endpoint changes, workers) would have to know. This stays a pure function of the config:
 * every worker and replica computes the same value. Comments, formatting and key order do not
 * change it; endpoints discovered for `service:` paths do not either (they are not config).
 */
export function configIdentity(config: UpstreamsConfig): string {
  const { file: _file, hash: _sourceHash, maxBodyBytes, ...content } = config;
  const hosts = content.hosts.map((host) => ({ ...host, paths: host.paths.map(withoutUnsetLaterFields) }));
  const canonical = canonicalRedacted({
    ...content,
    ...(maxBodyBytes === null ? {} : { maxBodyBytes }),
    hosts,
  });
  return createHash('sha256').update(`${LABEL}\n`).update(canonical).digest('hex');
}

/**
 * Fields that came after identity v1, once left out unless set (these of a path, and the global
 * `maxBodyBytes`): at their "none" (config/path-config) they are left out of the hash, so an
 * unchanged upstreams.yaml keeps its identity across versions and replicas of two versions agree
 * during a rolling upgrade.
 */
const LATER_PATH_FIELDS = [
  'exact',
  'unavailable',
  'stickySessions',
  'origin',
  'upstreamTls',
  'upstreamProtocol',
  'policies',
  'timeouts',
  'upstreamHost',
  'redirect',
  'canary',
  'conditions',
  'backendError',
  'backendErrorShare',
  'requestRedirect',
  'retry',
  'mirrors',
] as const satisfies readonly (keyof PathConfig)[];

const NONE = pathConfig('');

function withoutUnsetLaterFields(path: PathConfig): Partial<PathConfig> {
  const kept: Partial<PathConfig> = { ...path };
  for (const field of LATER_PATH_FIELDS) if (path[field] === NONE[field]) delete kept[field];
  return kept;
}

const LABEL = 'tollgate config identity v1';

/**
 * Fields holding secret values anywhere in the config: basic passwords and password hashes, API key
 * values, the masterkey, header rule values (`set: {Authorization: Bearer …}` is a common one). A new config field holding a secret must be added here (the identity test
 * checks that changing any of these leaves the identity alone).
 */
export const SECRET_FIELDS: ReadonlySet<string> = new Set([
  'password',
  'passwordHash',
  'key',
  'masterkey',
  'value',
]);

/** JSON with object keys sorted and secret values replaced, so equal configs give equal bytes. */
function canonicalRedacted(value: unknown): string {
  return JSON.stringify(value, function (this: unknown, name, item) {
    if (SECRET_FIELDS.has(name) && !Array.isArray(this) && item !== null && item !== undefined) {
      return '[redacted]';
    }
    if (item === null || typeof item !== 'object' || Array.isArray(item)) return item;
    const record = item as Record<string, unknown>;
    return Object.fromEntries(
      Object.keys(record)
        .toSorted()
        .map((key) => [key, record[key]]),
    );
  });
}
