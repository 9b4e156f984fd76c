/**
 * Sizes as nginx writes them (`client_max_body_size`, ingress-nginx's `proxy-body-size`): a whole
 * number of bytes, or with a suffix k/K, m/M, g/G for KiB, MiB, GiB (docs/configuration.md#max_body_bytes).
 */

const UNITS: Readonly<Record<string, number>> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

/** Largest accepted size: 1 TiB, far above any body a proxy should take, well inside a safe integer. */
export const MAX_BODY_BYTES = 1024 ** 4;

export function parseByteSize(text: string): { ok: true; bytes: number } | { ok: false; reason: string } {
  const match = /^([0-9]{1,13})([kKmMgG]?)$/.exec(text.trim());
  if (match === null)
    return { ok: false, reason: `'${text}' is not a size (a number of bytes, or with k, m or g: "8m")` };
  const bytes = Number(match[1]) * (UNITS[(match[2] as string).toLowerCase()] as number);
  if (bytes > MAX_BODY_BYTES) return { ok: false, reason: `'${text}' is more than 1 TiB` };
  return { ok: true, bytes };
}
