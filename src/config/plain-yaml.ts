import { isMap, isScalar, isSeq, type Node } from 'yaml';
import { type Place, type PlainField, PlainReader, type Segment } from '../policy/plain-reader.ts';
import type { Field, YamlReader } from './yaml-reader.ts';

/**
 * A file's fields handed to a policy reader (policy/) as plain values, and its problems put back at
 * their file:line:column: the readers work on values and key paths, the file alone knows lines.
 * YAML's own problems (a key written twice, a key that is not a string) are reported here, as the
 * values are taken apart.
 */
export interface PlainView {
  reader: PlainReader;
  /** The fields given, by key, as the plain reader reads them. */
  fields: Map<string, PlainField>;
  /** Where a place of one of the fields was written (null: nowhere, the top of the file). */
  nodeOf(place: Place): Node | null;
  /** Reports the plain reader's problems at their positions in the file; call once, after reading. */
  finish(): void;
}

export function plainView(r: YamlReader, given: readonly Field[]): PlainView {
  const places = new Map<string, { key: Node; value: Node | null }>();
  const nodeOf = (place: Place): Node | null => {
    const at = places.get(placeKey(place.segments));
    if (at === undefined) return null;
    return place.side === 'key' ? at.key : at.value;
  };
  const reader = new PlainReader({
    lineOf: (place) => r.lineOf(nodeOf(place) ?? (given[0]?.keyNode as Node)),
  });
  const fields = new Map<string, PlainField>();
  for (const field of given) {
    const at = [field.key];
    places.set(placeKey(at), { key: field.keyNode, value: field.node });
    const value = toPlain(r, field.node, field.path, at, places);
    fields.set(field.key, {
      key: field.key,
      keyNode: { value: field.key, place: { segments: at, side: 'key' } },
      node: { value, place: { segments: at, side: 'value' } },
      path: field.path,
    });
  }
  return {
    reader,
    fields,
    nodeOf,
    finish: () => {
      for (const issue of reader.issues) r.report(nodeOf(issue.place), issue.path, issue.message);
    },
  };
}

/** One field read by `read` over its plain value, problems reported at their lines. */
export function readPlain<T>(
  r: YamlReader,
  field: Field,
  read: (reader: PlainReader, field: PlainField) => T,
): T {
  const view = plainView(r, [field]);
  const result = read(view.reader, view.fields.get(field.key) as PlainField);
  view.finish();
  return result;
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

/** A node YAML gives that no key takes (described as "an unsupported value"). */
const UNSUPPORTED = Symbol('unsupported YAML value');
