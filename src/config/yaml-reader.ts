import { isAlias, isMap, isScalar, isSeq, LineCounter, type Node, parseDocument } from 'yaml';
import { closestKey } from './suggest.ts';
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

const MAX_LISTED_KEYS = 8;

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
    // uniqueKeys off: duplicates are reported by fields()/entries() with both line numbers.
    const doc = parseDocument(text, { lineCounter: this.#lines, uniqueKeys: false, prettyErrors: false });
    for (const problem of [...doc.errors, ...doc.warnings]) {
      this.#push(problem.pos[0], '', `invalid YAML: ${problem.message}`);
    }
    this.wellFormed = this.issues.length === 0;
    this.#resolveAlias = (node) => (isAlias(node) ? (node.resolve(doc) ?? null) : node);
    this.#root = this.#deref(doc.contents);
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
    // A long list of known keys is written out once per mapping, with the first unknown key that has
    // no better hint; later ones point back at that line rather than repeating it.
    let listedOnLine: number | undefined;
    for (const field of entries) {
      if (known.includes(field.key)) {
        fields.set(field.key, field);
        continue;
      }
      const elsewhere = Object.hasOwn(misplaced, field.key) ? misplaced[field.key] : undefined;
      const guess = closestKey(field.key, known);
      let hint = elsewhere ?? (guess !== undefined ? `did you mean '${guess}'?` : undefined);
      if (hint === undefined) {
        if (known.length <= MAX_LISTED_KEYS) hint = `known keys: ${known.join(', ')}`;
        else if (listedOnLine !== undefined) hint = `the known keys are listed on line ${listedOnLine}`;
        else {
          hint = `known keys: ${known.toSorted().join(', ')}`;
          listedOnLine = this.lineOf(field.keyNode);
        }
      }
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

  #deref(node: unknown): Node | null {
    if (node == null) return null;
    return this.#resolveAlias(node as Node);
  }

  #push(offset: number, path: string, message: string): void {
    const { line, col } = this.#lines.linePos(offset);
    this.issues.push({ file: this.file, line, column: col, path, message });
  }
}

function describeRange(rule: NumberRule): string {
  const parts: string[] = [];
  if (rule.min !== undefined) parts.push(rule.minExclusive ? `> ${rule.min}` : `>= ${rule.min}`);
  if (rule.max !== undefined) parts.push(`<= ${rule.max}`);
  return `must be ${parts.join(' and ')}`;
}
