import { readMainCache as readPlainMainCache } from '../policy/cache.ts';
import { readPlain } from './plain-yaml.ts';
import type { Field, YamlReader } from './yaml-reader.ts';

/** main.yaml's `cache: { max_bytes }`, read by policy/cache's reader (docs/traffic.md#response-cache). */
export function readMainCache(r: YamlReader, field: Field): { maxBytes: number } | undefined {
  return readPlain(r, field, readPlainMainCache);
}
