/**
 * Reads the reload series of one watched file from a /metrics text: `file` is the label value
 * (`upstreams.yaml`, `main.yaml`, `tls_certificate`, `masterkey_file`, …). NaN when the series is absent.
 */
export function reloadCount(metrics: string, file: string, result: string): number {
  const line = new RegExp(
    `^tollgate_config_reloads_total\\{file="${escapeRegExp(file)}",result="${result}"\\} (\\d+)$`,
    'm',
  );
  return Number(metrics.match(line)?.[1] ?? Number.NaN);
}

/** Unix time (seconds) the live content of `file` was loaded, or NaN. */
export function lastReloadSuccess(metrics: string, file: string): number {
  const line = new RegExp(
    `^tollgate_config_last_reload_success_timestamp_seconds\\{file="${escapeRegExp(file)}"\\} (\\S+)$`,
    'm',
  );
  return Number(metrics.match(line)?.[1] ?? Number.NaN);
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
