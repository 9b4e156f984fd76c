import { parseByteSize } from '../config/byte-size.ts';
import type { CacheConfig } from '../config/policy-types.ts';
import { type PlainField as Field, isMapping, type PlainReader } from './plain-reader.ts';

/**
 * The response cache's keys (docs/traffic.md#response-cache): a path's `cache: { max_bytes,
 * max_object_bytes, default_ttl_seconds }` and main.yaml's `cache: { max_bytes }` (through
 * config/validate-cache). Sizes are a byte count or nginx's units (`64m`), as `max_body_bytes`.
 */

const PATH_CACHE_KEYS = ['max_bytes', 'max_object_bytes', 'default_ttl_seconds'];
const MAIN_CACHE_KEYS = ['max_bytes'];

/** A path's `max_object_bytes` when not written: nginx's own default buffer thinking, one MiB. */
export const DEFAULT_MAX_OBJECT_BYTES = 1024 * 1024;
/** A year: longer than any freshness a default should give. */
const MAX_DEFAULT_TTL_SECONDS = 365 * 86_400;

/** A size of at least one byte: a number, or text with k/m/g. */
function readSize(r: PlainReader, field: Field): number | undefined {
  if (typeof field.node?.value === 'number')
    return r.number(field, { integer: true, min: 1, max: 1024 ** 4 });
  const text = r.string(field);
  if (text === undefined) return undefined;
  const size = parseByteSize(text);
  if (!size.ok) {
    r.report(r.at(field), field.path, size.reason);
    return undefined;
  }
  if (size.bytes < 1) {
    r.report(r.at(field), field.path, 'must be at least one byte');
    return undefined;
  }
  return size.bytes;
}

/** A path's `cache:`; undefined when it is invalid (then reported at its own line). */
export function readPathCache(r: PlainReader, field: Field): CacheConfig | undefined {
  if (!isMapping(field.node?.value)) {
    r.report(
      r.at(field),
      field.path,
      `expected { max_bytes, max_object_bytes, default_ttl_seconds }, got ${r.describe(field.node)}`,
    );
    return undefined;
  }
  const fields = r.fields(field.node, field.path, PATH_CACHE_KEYS);
  if (fields === null) return undefined;
  const get = (key: string): Field | undefined => r.given(fields, key);
  const maxField = get('max_bytes');
  if (maxField === undefined) {
    r.report(field.keyNode, field.path, "missing 'max_bytes' (what this path's cache may hold, e.g. 64m)");
    return undefined;
  }
  const maxBytes = readSize(r, maxField);
  const objectField = get('max_object_bytes');
  const maxObjectBytes = objectField ? readSize(r, objectField) : DEFAULT_MAX_OBJECT_BYTES;
  const ttlField = get('default_ttl_seconds');
  const defaultTtlSeconds = ttlField
    ? r.number(ttlField, { integer: true, min: 0, max: MAX_DEFAULT_TTL_SECONDS })
    : 0;
  if (maxBytes === undefined || maxObjectBytes === undefined || defaultTtlSeconds === undefined)
    return undefined;
  if (objectField !== undefined && maxObjectBytes > maxBytes) {
    r.report(
      r.at(objectField),
      objectField.path,
      `${maxObjectBytes} bytes is more than max_bytes (${maxBytes}): no response that large could be stored`,
    );
    return undefined;
  }
  // An unwritten max_object_bytes never exceeds the store it goes into.
  return { maxBytes, maxObjectBytes: Math.min(maxObjectBytes, maxBytes), defaultTtlSeconds };
}

/** main.yaml's `cache: { max_bytes }`: what all paths' caches hold together, in each process. */
export function readMainCache(r: PlainReader, field: Field): { maxBytes: number } | undefined {
  if (!isMapping(field.node?.value)) {
    r.report(r.at(field), field.path, `expected { max_bytes }, got ${r.describe(field.node)}`);
    return undefined;
  }
  const fields = r.fields(field.node, field.path, MAIN_CACHE_KEYS);
  const maxField = fields?.get('max_bytes');
  if (fields === null) return undefined;
  if (maxField === undefined || r.isNull(maxField.node)) {
    r.report(
      field.keyNode,
      field.path,
      "missing 'max_bytes' (what all paths' caches hold together, e.g. 256m)",
    );
    return undefined;
  }
  const maxBytes = readSize(r, maxField);
  return maxBytes === undefined ? undefined : { maxBytes };
}
