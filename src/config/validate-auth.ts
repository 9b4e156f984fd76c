import { dirname, resolve } from 'node:path';
import { isMap, isScalar, isSeq, type Node } from 'yaml';
import { readAuthorization } from '../policy/authorization.ts';
import type { FileOutcome, PolicyContext } from '../policy/context.ts';
import { type Place, PlainReader, type Segment } from '../policy/plain-reader.ts';
import { FileCheckError, readCaBundle, readJwksFile } from './file-checks.ts';
import { rememberPosition } from './positions.ts';
import type { AuthorizationConfig } from './types.ts';
import type { Field, YamlReader } from './yaml-reader.ts';

/**
 * An upstreams.yaml `authorization` object, read by the one policy reader (policy/authorization)
 * over its plain value; this file only gives it the file's context (its files, read relative to it)
 * and attaches each problem's file:line:column afterwards, from the key path the reader reports.
 * YAML's own problems (a key written twice) are reported here, as the value is taken apart.
 */
export function validateAuthorization(r: YamlReader, field: Field): AuthorizationConfig | null {
  const places = new Map<string, { key: Node; value: Node | null }>();
  places.set(placeKey([]), { key: field.keyNode, value: field.node });
  const value = toPlain(r, field.node, field.path, [], places);
  const nodeOf = (place: Place): Node | null => {
    const at = places.get(placeKey(place.segments));
    if (at === undefined) return null;
    return place.side === 'key' ? at.key : at.value;
  };
  const plain = new PlainReader({ lineOf: (place) => r.lineOf(nodeOf(place) ?? field.keyNode) });
  const read = readAuthorization(plain, plain.root(field.key, value, field.path), fileContext(r));
  for (const issue of plain.issues) r.report(nodeOf(issue.place), issue.path, issue.message);
  // The provider is checked against main.yaml once both files are read (config/validate-oidc), at its line.
  const provider = nodeOf({ segments: ['provider'], side: 'value' });
  if (read?.oidc !== undefined && provider !== null)
    rememberPosition(read.oidc, 'provider', { file: r.file, ...r.positionOf(provider) });
  return read;
}

/** What a file's policy may read: files relative to the file, with the readers start uses. */
function fileContext(r: YamlReader): PolicyContext {
  const check = (value: string, read: (path: string) => unknown): FileOutcome => {
    const path = resolve(dirname(r.file), value);
    try {
      read(path);
    } catch (error) {
      if (!(error instanceof FileCheckError)) throw error;
      return { problem: error.message };
    }
    return { path };
  };
  return {
    files: {
      jwks: (value) => check(value, readJwksFile),
      caBundle: (value) => check(value, (path) => readCaBundle(path, 'ca_file')),
    },
  };
}

const placeKey = (segments: readonly Segment[]): string => JSON.stringify(segments);

/** The plain value of a YAML node, recording where each key and value is (aliases resolved). */
function toPlain(
  r: YamlReader,
  node: Node | null,
  path: string,
  segments: readonly Segment[],
  places: Map<string, { key: Node; value: Node | null }>,
): unknown {
  if (r.isNull(node)) return null;
  if (isMap(node)) {
    // A null-prototype object: a key named __proto__ is data like any other.
    const object: Record<string, unknown> = Object.create(null);
    for (const entry of r.entries(node, path) ?? []) {
      const at = [...segments, entry.key];
      places.set(placeKey(at), { key: entry.keyNode, value: entry.node });
      object[entry.key] = toPlain(r, entry.node, entry.path, at, places);
    }
    return object;
  }
  if (isSeq(node)) {
    const items = r.items({ key: '', keyNode: node, node, path }) ?? [];
    return items.map((item) => {
      const at = [...segments, item.index];
      places.set(placeKey(at), { key: item.node ?? node, value: item.node });
      return toPlain(r, item.node, item.path, at, places);
    });
  }
  if (isScalar(node)) return node.value;
  return UNSUPPORTED;
}

/** A node YAML gives that no policy key takes (described as "an unsupported value"). */
const UNSUPPORTED = Symbol('unsupported YAML value');
