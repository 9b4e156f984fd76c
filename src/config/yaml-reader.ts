import {
  type Alias,
  isAlias,
  isMap,
  isPair,
  isScalar,
  isSeq,
  LineCounter,
  type Node,
  parseDocument,
} from 'yaml';
import { unknownKeyHint } from './suggest.ts';
import type { ConfigIssue } from './types.ts';

/** One `key: value` of a mapping, with the YAML path of the value. */
export interface Field {
  key: string;
  keyNode: Node;
  /** The value with aliases resolved; a null scalar (or null) when the key has no value. */
  node: Node | null;
  path: string;
}

/** One element of a sequence. */
export interface Item {
  node: Node | null;
  path: string;
  index: number;
}

/**
 * How many nodes a file may hold once its aliases (`*name`) are expanded (docs/security.md, "Config
 * files"). Validation walks aliased content once per use, so this bounds its work and memory: a few
 * hundred KB of YAML reusing one block by alias can otherwise stand for millions of routes.
 */
export const MAX_EXPANDED_NODES = 300_000;

/**
 * The `yaml` package's bound on alias use (its `maxAliasCount`, at the package's default): one
 * anchor used more than this many times, or nested anchors whose uses multiply past it, make the
 * file refused. Tollgate's own named policies (`authorization` aliases) need no YAML anchors.
 */
export const MAX_ALIAS_COUNT = 100;

/**
 * The largest config file read: twice what a ConfigMap can hold (1 MiB), so a file of 20,000 paths
 * still loads; anything larger is refused before the YAML parser sees it.
 */
export const MAX_CONFIG_BYTES = 2 * 1024 * 1024;

export interface NumberRule {
  integer?: boolean;
  min?: number;
  /** When true, `min` itself is refused (for "positive" numbers). */
  minExclusive?: boolean;
  max?: number;
}

/**
 * A parsed YAML file plus the list of problems found in it. Validators walk the document through
 * these helpers, which record every problem with file, line, column and YAML path and then return
 * undefined so the walk can go on and report the next problem too.
 *
 * Convention: a key with a null value (`key:` or `key: ~`) counts as not set, so the default applies;
 * Helm templates render unset values that way.
 */
export class YamlReader {
  readonly file: string;
  readonly issues: ConfigIssue[] = [];
  /** False when the YAML itself is broken; the structure is then unreliable and not validated. */
  readonly wellFormed: boolean;
  readonly #root: Node | null;
  readonly #lines: LineCounter;
  readonly #resolveAlias: (node: Node) => Node | null;

  constructor(text: string, file: string) {
    this.file = file;
    this.#lines = new LineCounter();
    if (Buffer.byteLength(text) > MAX_CONFIG_BYTES) {
      this.#push(0, '', `the file is larger than ${MAX_CONFIG_BYTES} bytes: refused`);
      this.wellFormed = false;
      this.#root = null;
      this.#resolveAlias = () => null;
      return;
    }
    // uniqueKeys off: duplicates are reported by fields()/entries() with both line numbers.
    const doc = parseDocument(text, { lineCounter: this.#lines, uniqueKeys: false, prettyErrors: false });
    for (const problem of [...doc.errors, ...doc.warnings]) {
      this.#push(problem.pos[0], '', `invalid YAML: ${problem.message}`);
    }
    // Aliases are resolved once here, in one pass (the package's own resolve walks the whole
    // document per alias), and their expansion is counted: past the budget, the file is refused.
    const aliases = this.issues.length === 0 ? this.#expandAliases(doc.contents as Node | null) : new Map();
    if (this.issues.length === 0 && aliases.size > 0) {
      try {
        doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
      } catch (error) {
        if (!(error instanceof ReferenceError)) throw error;
        this.#push(
          0,
          '',
          `YAML aliases (*name) are used more than ${MAX_ALIAS_COUNT} times (counting aliases inside ` +
            'anchored blocks once per use): refused',
        );
      }
    }
    this.wellFormed = this.issues.length === 0;
    this.#resolveAlias = (node) => (isAlias(node) ? (aliases.get(node) ?? null) : node);
    this.#root = this.wellFormed ? this.#deref(doc.contents) : null;
  }

  /** The document's top node, or null for an empty document. */
  root(): Node | null {
    return this.#root;
  }

  /** Records a problem at `at` (its start), or at the top of the file when there is no node. */
  report(at: Node | null | undefined, path: string, message: string): void {
    this.#push(at?.range?.[0] ?? 0, path, message);
  }

  /** Where to point for a field's value: the value when there is one, else its key. */
  at(field: Field): Node {
    return field.node?.range && !this.isNull(field.node) ? field.node : field.keyNode;
  }

  isNull(node: Node | null | undefined): boolean {
    return node == null || (isScalar(node) && node.value === null);
  }

  /** True for a field that is missing, null, or an empty list/mapping. */
  isAbsentOrEmpty(field: Field | undefined): boolean {
    if (field === undefined || this.isNull(field.node)) return true;
    return (isSeq(field.node) || isMap(field.node)) && field.node.items.length === 0;
  }

  /** A field of `fields` that was written with a value: absent and `key: null` / `key:` both give undefined. */
  given(fields: ReadonlyMap<string, Field> | null | undefined, key: string): Field | undefined {
    const field = fields?.get(key);
    return field !== undefined && !this.isNull(field.node) ? field : undefined;
  }

  /**
   * The fields of a mapping with a fixed set of keys. Unknown keys are reported with the closest
   * known key as a suggestion, or with `misplaced[key]` when the key is valid somewhere else.
   * Returns null (after reporting) when `node` is not a mapping.
   */
  fields(
    node: Node | null,
    path: string,
    known: readonly string[],
    misplaced: Readonly<Record<string, string>> = {},
  ): Map<string, Field> | null {
    const entries = this.entries(node, path);
    if (entries === null) return null;
    const fields = new Map<string, Field>();
    let listedAt: string | undefined;
    for (const field of entries) {
      if (known.includes(field.key)) {
        fields.set(field.key, field);
        continue;
      }
      const { hint, listsKeys } = unknownKeyHint(field.key, known, misplaced, listedAt);
      if (listsKeys) listedAt = `on line ${this.lineOf(field.keyNode)}`;
      this.report(field.keyNode, field.path, `unknown key '${field.key}' (${hint})`);
    }
    return fields;
  }

  /** Every `key: value` of a mapping whose keys are data (hosts, path prefixes), duplicates reported. */
  entries(node: Node | null, path: string): Field[] | null {
    if (!isMap(node)) {
      this.report(node, path, `expected a mapping, got ${this.describe(node)}`);
      return null;
    }
    const seen = new Map<string, Node>();
    const entries: Field[] = [];
    for (const pair of node.items) {
      const keyNode = pair.key as Node | null;
      if (!isScalar(keyNode) || typeof keyNode.value !== 'string') {
        this.report(keyNode ?? node, path, `keys must be strings, got ${this.describe(keyNode)}`);
        continue;
      }
      const key = keyNode.value;
      const fieldPath = path ? `${path}.${key}` : key;
      const first = seen.get(key);
      if (first !== undefined) {
        this.report(keyNode, fieldPath, `duplicate key '${key}' (first set on line ${this.lineOf(first)})`);
        continue;
      }
      seen.set(key, keyNode);
      entries.push({ key, keyNode, node: this.#deref(pair.value), path: fieldPath });
    }
    return entries;
  }

  /** The elements of a sequence, or null (after reporting) when `field` is not one. */
  items(field: Field, expected = 'a list'): Item[] | null {
    if (!isSeq(field.node)) {
      this.report(this.at(field), field.path, `expected ${expected}, got ${this.describe(field.node)}`);
      return null;
    }
    return field.node.items.map((item, index) => ({
      node: this.#deref(item),
      path: `${field.path}[${index}]`,
      index,
    }));
  }

  /** A string value; numbers and booleans are refused (quote them) rather than silently converted. */
  string(field: Field | Item, { allowEmpty = false } = {}): string | undefined {
    const node = field.node;
    if (!isScalar(node) || typeof node.value !== 'string') {
      const hint = isScalar(node) && node.value !== null ? ' (quote the value if it is meant as text)' : '';
      this.report(this.#where(field), field.path, `expected a string, got ${this.describe(node)}${hint}`);
      return undefined;
    }
    if (!allowEmpty && node.value === '') {
      this.report(node, field.path, 'must not be empty');
      return undefined;
    }
    return node.value;
  }

  boolean(field: Field): boolean | undefined {
    const node = field.node;
    if (isScalar(node) && typeof node.value === 'boolean') return node.value;
    this.report(this.at(field), field.path, `expected true or false, got ${this.describe(node)}`);
    return undefined;
  }

  number(field: Field, rule: NumberRule = {}): number | undefined {
    const node = field.node;
    const kind = rule.integer ? 'an integer' : 'a number';
    if (!isScalar(node) || typeof node.value !== 'number' || !Number.isFinite(node.value)) {
      this.report(this.at(field), field.path, `expected ${kind}, got ${this.describe(node)}`);
      return undefined;
    }
    const value = node.value;
    if (rule.integer && !Number.isInteger(value)) {
      this.report(node, field.path, `expected an integer, got ${value}`);
      return undefined;
    }
    const tooSmall = rule.min !== undefined && (rule.minExclusive ? value <= rule.min : value < rule.min);
    const tooLarge = rule.max !== undefined && value > rule.max;
    if (tooSmall || tooLarge) {
      this.report(node, field.path, `${value} is out of range (${describeRange(rule)})`);
      return undefined;
    }
    return value;
  }

  describe(node: Node | null | undefined): string {
    if (this.isNull(node)) return 'nothing';
    if (isMap(node)) return 'a mapping';
    if (isSeq(node)) return 'a list';
    if (isScalar(node)) {
      switch (typeof node.value) {
        case 'string':
          return 'a string';
        case 'number':
          return 'a number';
        case 'boolean':
          return 'a boolean';
      }
    }
    return 'an unsupported value';
  }

  /** Line and column of the value of a top-level key, if the document has it. */
  locateTopLevelValue(key: string): { line: number; column: number } | undefined {
    if (!isMap(this.#root)) return undefined;
    const pair = this.#root.items.find((item) => isScalar(item.key) && item.key.value === key);
    const node = (pair?.value ?? pair?.key) as Node | undefined;
    if (!node?.range) return undefined;
    const { line, col } = this.#lines.linePos(node.range[0]);
    return { line, column: col };
  }

  /** Line and column of the value at `keys` (a path of mapping keys from the top), if written. */
  locateNestedValue(keys: readonly string[]): { line: number; column: number } | undefined {
    let node: unknown = this.#root;
    let pair: { key: unknown; value: unknown } | undefined;
    for (const key of keys) {
      if (!isMap(node)) return undefined;
      pair = node.items.find((item) => isScalar(item.key) && item.key.value === key);
      node = pair?.value;
    }
    const found = (pair?.value ?? pair?.key) as Node | undefined;
    if (!found?.range) return undefined;
    const { line, col } = this.#lines.linePos(found.range[0]);
    return { line, column: col };
  }

  /** Line and column where `node` starts. */
  positionOf(node: Node): { line: number; column: number } {
    const { line, col } = this.#lines.linePos(node.range?.[0] ?? 0);
    return { line, column: col };
  }

  lineOf(node: Node): number {
    return this.#lines.linePos(node.range?.[0] ?? 0).line;
  }

  #where(field: Field | Item): Node | null {
    return 'keyNode' in field ? this.at(field) : field.node;
  }

  /**
   * Maps every alias to its anchor (the latest one of that name before it, as YAML defines) and
   * counts the document's size with every alias expanded; reports and stops past MAX_EXPANDED_NODES
   * or at an alias inside its own anchor.
   */
  #expandAliases(root: Node | null): Map<Alias, Node> {
    const targets = new Map<Alias, Node>();
    const anchors = new Map<string, Node>();
    const sizes = new Map<unknown, number>();
    const open = new Set<unknown>();
    const over = MAX_EXPANDED_NODES + 1;
    const refuse = (at: unknown, message: string): never => {
      this.#push((at as Node | null)?.range?.[0] ?? 0, '', message);
      throw new ExpansionRefused();
    };
    const sizeOf = (node: unknown): number => {
      if (node == null) return 0;
      const known = sizes.get(node);
      if (known !== undefined) return known;
      if (isAlias(node)) {
        const target = anchors.get(node.source);
        if (target === undefined)
          return refuse(node, `invalid YAML: alias *${node.source} names no anchor before it`);
        if (open.has(target))
          return refuse(node, `invalid YAML: alias *${node.source} is inside its own anchor`);
        targets.set(node, target);
        return sizeOf(target);
      }
      const anchor = (node as { anchor?: string }).anchor;
      if (anchor) anchors.set(anchor, node as Node);
      open.add(node);
      let size = 1;
      if (isMap(node) || isSeq(node)) {
        for (const item of node.items as unknown[]) {
          size += isPair(item) ? sizeOf(item.key) + sizeOf(item.value) : sizeOf(item);
          if (size >= over) break;
        }
      }
      open.delete(node);
      if (size >= over)
        refuse(
          node,
          `the file stands for more than ${MAX_EXPANDED_NODES} YAML nodes once its aliases (*name) are expanded: ` +
            'refused (repeat fewer blocks by alias, or split the config)',
        );
      sizes.set(node, size);
      return size;
    };
    try {
      sizeOf(root);
    } catch (error) {
      if (error instanceof ExpansionRefused) return targets;
      if (error instanceof RangeError) {
        this.#push(0, '', 'invalid YAML: nested too deeply');
        return targets;
      }
      throw error;
    }
    return targets;
  }

  #deref(node: unknown): Node | null {
    if (node == null) return null;
    return this.#resolveAlias(node as Node);
  }

  #push(offset: number, path: string, message: string): void {
    const { line, col } = this.#lines.linePos(offset);
    this.issues.push({ file: this.file, line, column: col, path, message });
  }
}

class ExpansionRefused extends Error {}

function describeRange(rule: NumberRule): string {
  const parts: string[] = [];
  if (rule.min !== undefined) parts.push(rule.minExclusive ? `> ${rule.min}` : `>= ${rule.min}`);
  if (rule.max !== undefined) parts.push(`<= ${rule.max}`);
  return `must be ${parts.join(' and ')}`;
}
