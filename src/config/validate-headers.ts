import { isMap } from 'yaml';
import type { HeaderOps, HeaderValue } from './types.ts';
import { checkHeaderName } from './validate-forward.ts';
import type { Field, YamlReader } from './yaml-reader.ts';

const OPS_KEYS = ['set', 'add', 'remove'] as const;

/** Header rule keys of one level (global or path), Aralez's lists included. */
export const HEADER_RULE_KEYS = ['request_headers', 'response_headers', 'server_headers', 'client_headers'];

/**
 * The header rules of one level: `request_headers` and `response_headers`, with Aralez's
 * `server_headers` read as more `request_headers.set` and `client_headers` as more
 * `response_headers.add` (a name given twice across them is an error).
 */
export function readHeaderRules(
  r: YamlReader,
  fields: Map<string, Field>,
): { requestHeaders: HeaderOps | null; responseHeaders: HeaderOps | null } {
  const level = (opsKey: string, listKey: string, listOp: 'set' | 'add'): HeaderOps | null => {
    const opsField = fields.get(opsKey);
    const listField = fields.get(listKey);
    const ops = opsField && !r.isNull(opsField.node) ? readHeaderOps(r, opsField) : null;
    if (listField === undefined || r.isNull(listField.node)) return ops;
    const merged = ops ?? { set: [], add: [], remove: [] };
    for (const value of readHeaderList(r, listField)) {
      const taken =
        [...merged.set, ...merged.add].some((other) => other.name === value.name) ||
        merged.remove.includes(value.name);
      if (taken) {
        r.report(
          listField.keyNode,
          listField.path,
          `'${value.name}' also has a rule in '${opsKey}'; keep one`,
        );
        continue;
      }
      merged[listOp].push(value);
    }
    return merged;
  };
  return {
    requestHeaders: level('request_headers', 'server_headers', 'set'),
    responseHeaders: level('response_headers', 'client_headers', 'add'),
  };
}

/**
 * `request_headers` / `response_headers`: `{ set: {Name: value}, add: {Name: value}, remove: [Name] }`
 * (docs/configuration.md#header-rules). A name appears once per level; names Tollgate manages and
 * hop-by-hop names are refused (header-names.ts).
 */
export function readHeaderOps(r: YamlReader, field: Field): HeaderOps | null {
  const fields = r.fields(field.node, field.path, OPS_KEYS);
  if (fields === null) return null;
  const ops: HeaderOps = { set: [], add: [], remove: [] };
  const seen = new Map<string, string>();
  const claim = (name: string, op: string, at: { node: Field['node']; path: string }): boolean => {
    const first = seen.get(name);
    if (first !== undefined) {
      r.report(at.node, at.path, `'${name}' already has a rule here ('${first}'); one rule per name`);
      return false;
    }
    seen.set(name, op);
    return true;
  };
  for (const op of ['set', 'add'] as const) {
    const values = fields.get(op);
    if (values === undefined || r.isNull(values.node)) continue;
    if (!isMap(values.node)) {
      r.report(
        r.at(values),
        values.path,
        `expected a mapping of header name to value, got ${r.describe(values.node)}`,
      );
      continue;
    }
    for (const entry of r.entries(values.node, values.path) ?? []) {
      const name = checkHeaderName(r, entry.key, entry.keyNode, entry.path);
      const value = r.string(entry, { allowEmpty: true });
      if (name === undefined || value === undefined || !claim(name, op, entry)) continue;
      ops[op].push({ name, value });
    }
  }
  const remove = fields.get('remove');
  if (remove && !r.isNull(remove.node)) {
    for (const item of r.items(remove, 'a list of header names') ?? []) {
      const text = r.string(item);
      const name = text === undefined ? undefined : checkHeaderName(r, text, item.node, item.path);
      if (name !== undefined && claim(name, 'remove', item)) ops.remove.push(name);
    }
  }
  return ops;
}

/**
 * Aralez's `server_headers` / `client_headers`: a list of `"Name:Value"` strings (docs/configuration.md
 * "Configs written for Aralez").
 */
export function readHeaderList(r: YamlReader, field: Field): HeaderValue[] {
  const values: HeaderValue[] = [];
  for (const item of r.items(field, 'a list of "Name:Value" strings') ?? []) {
    const text = r.string(item);
    if (text === undefined) continue;
    const colon = text.indexOf(':');
    if (colon <= 0) {
      r.report(item.node, item.path, "must be 'Name:Value'");
      continue;
    }
    const name = checkHeaderName(r, text.slice(0, colon).trim(), item.node, item.path);
    if (name === undefined) continue;
    if (values.some((value) => value.name === name)) {
      r.report(item.node, item.path, `'${name}' is listed twice`);
      continue;
    }
    values.push({ name, value: text.slice(colon + 1).trim() });
  }
  return values;
}
