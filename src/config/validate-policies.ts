import {
  POLICY_KEYS,
  readMaxBodyBytes as readPlainMaxBodyBytes,
  readPathPolicies as readPlainPathPolicies,
} from '../policy/request-policies.ts';
import { plainView, readPlain } from './plain-yaml.ts';
import type { PathPolicies } from './policy-types.ts';
import type { Field, YamlReader } from './yaml-reader.ts';

/**
 * upstreams.yaml's request policies (docs/policies.md), read by policy/request-policies over their
 * plain values, as a TollgatePolicy's are; problems reported at their lines (config/plain-yaml).
 */

/** The global `max_body_bytes`: bytes as a number, or a size with k/m/g ("8m"); 0 = unlimited. */
export function readMaxBodyBytes(r: YamlReader, field: Field): number | undefined {
  return readPlain(r, field, readPlainMaxBodyBytes);
}

/** The policies of one path (only the keys written), for PathConfig's `policies`. */
export function readPathPolicies(r: YamlReader, fields: Map<string, Field>): { policies?: PathPolicies } {
  const written = POLICY_KEYS.map((key) => fields.get(key)).filter((field) => field !== undefined);
  if (written.length === 0) return {};
  const view = plainView(r, written);
  const read = readPlainPathPolicies(view.reader, view.fields);
  view.finish();
  return read;
}
