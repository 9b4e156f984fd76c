import { unknownKeyHint } from '../config/suggest.ts';

/**
 * The reader the policy readers walk a value with (docs/architecture.md, one policy model): plain
 * values as JSON or a YAML file's `toJS` gives them, never a parser's nodes. It records each problem
 * with the key path it is about and whether it points at the key or the value, so a source attaches
 * its own positions afterwards: upstreams.yaml its file:line:column (config/validate-auth), a
 * TollgatePolicy or an Ingress the key path alone.
 *
 * The method names and messages are YamlReader's, so a policy reads the same in every source and an
 * upstreams.yaml message keeps its wording. Convention as there: a key with a null value counts as
 * not set.
 */

/** A step of a key path: a mapping key or a list index. */
export type Segment = string | number;

/** Where a problem points: the key of `segments`, or its value (relative to the value read). */
export interface Place {
  segments: readonly Segment[];
  side: 'key' | 'value';
}

/** A value being read, with where it is. */
export interface PlainNode {
  value: unknown;
  place: Place;
}

/** One `key: value` of a mapping. */
export interface PlainField {
  key: string;
  keyNode: PlainNode;
  /** null when the key has no value (`key:` or `key: null`). */
  node: PlainNode | null;
  path: string;
}

/** One element of a list. */
export interface PlainItem {
  node: PlainNode | null;
  path: string;
  index: number;
}

export interface PolicyIssue {
  /** The key path, as upstreams.yaml writes it (`authorization.forward.timeout_seconds`). */
  path: string;
  message: string;
  place: Place;
}

export interface NumberRule {
  integer?: boolean;
  min?: number;
  minExclusive?: boolean;
  max?: number;
}

/**
 * `lineOf`: where a place is, for a source that has lines (the hint "the known keys are listed on
 * line N"); without it that hint names the key path instead.
 */
export class PlainReader {
  readonly issues: PolicyIssue[] = [];
  /** Read and used, but the author should act (a weak hash, a key in the other place). */
  readonly warnings: PolicyIssue[] = [];
  readonly #lineOf: ((place: Place) => number) | undefined;

  constructor(options: { lineOf?: (place: Place) => number } = {}) {
    this.#lineOf = options.lineOf;
  }

  /** The field a value stands for: `path` is the key path it is written at (`authorization`). */
  root(key: string, value: unknown, path = key): PlainField {
    return {
      key,
      keyNode: { value: key, place: { segments: [], side: 'key' } },
      node: value === undefined ? null : { value, place: { segments: [], side: 'value' } },
      path,
    };
  }

  report(at: PlainNode | null | undefined, path: string, message: string): void {
    this.issues.push({ path, message, place: at?.place ?? { segments: [], side: 'value' } });
  }

  warn(at: PlainNode | null | undefined, path: string, message: string): void {
    this.warnings.push({ path, message, place: at?.place ?? { segments: [], side: 'value' } });
  }

  /** Where to point for a field's value: the value when there is one, else its key. */
  at(field: PlainField): PlainNode {
    return field.node !== null && !this.isNull(field.node) ? field.node : field.keyNode;
  }

  isNull(node: PlainNode | null | undefined): boolean {
    return node == null || node.value === null || node.value === undefined;
  }

  isAbsentOrEmpty(field: PlainField | undefined): boolean {
    if (field === undefined || this.isNull(field.node)) return true;
    const value = field.node?.value;
    if (Array.isArray(value)) return value.length === 0;
    return isMapping(value) && Object.keys(value).length === 0;
  }

  given(fields: ReadonlyMap<string, PlainField> | null | undefined, key: string): PlainField | undefined {
    const field = fields?.get(key);
    return field !== undefined && !this.isNull(field.node) ? field : undefined;
  }

  /** As YamlReader.fields: unknown keys reported with the closest known one (or `misplaced[key]`). */
  fields(
    node: PlainNode | null,
    path: string,
    known: readonly string[],
    misplaced: Readonly<Record<string, string>> = {},
  ): Map<string, PlainField> | null {
    const entries = this.entries(node, path);
    if (entries === null) return null;
    const fields = new Map<string, PlainField>();
    let listedAt: string | undefined;
    for (const field of entries) {
      if (known.includes(field.key)) {
        fields.set(field.key, field);
        continue;
      }
      const { hint, listsKeys } = unknownKeyHint(field.key, known, misplaced, listedAt);
      if (listsKeys)
        listedAt = this.#lineOf === undefined ? `at ${path}` : `on line ${this.#lineOf(field.keyNode.place)}`;
      this.report(field.keyNode, field.path, `unknown key '${field.key}' (${hint})`);
    }
    return fields;
  }

  /** Every `key: value` of a mapping, in written order. */
  entries(node: PlainNode | null, path: string): PlainField[] | null {
    const value = node?.value;
    if (node === null || !isMapping(value)) {
      this.report(node, path, `expected a mapping, got ${this.describe(node)}`);
      return null;
    }
    const base = node.place.segments;
    return Object.entries(value).map(([key, item]) => {
      const segments = [...base, key];
      return {
        key,
        keyNode: { value: key, place: { segments, side: 'key' } },
        node: item === undefined ? null : { value: item, place: { segments, side: 'value' } },
        path: path ? `${path}.${key}` : key,
      };
    });
  }

  items(field: PlainField, expected = 'a list'): PlainItem[] | null {
    const value = field.node?.value;
    if (field.node === null || !Array.isArray(value)) {
      this.report(this.at(field), field.path, `expected ${expected}, got ${this.describe(field.node)}`);
      return null;
    }
    const base = field.node.place.segments;
    return value.map((item, index) => ({
      node: { value: item, place: { segments: [...base, index], side: 'value' } },
      path: `${field.path}[${index}]`,
      index,
    }));
  }

  string(field: PlainField | PlainItem, { allowEmpty = false } = {}): string | undefined {
    const node = field.node;
    const value = node?.value;
    if (typeof value !== 'string') {
      const hint = isScalar(value) && value !== null ? ' (quote the value if it is meant as text)' : '';
      const where = 'keyNode' in field ? this.at(field) : field.node;
      this.report(where, field.path, `expected a string, got ${this.describe(node)}${hint}`);
      return undefined;
    }
    if (!allowEmpty && value === '') {
      this.report(node, field.path, 'must not be empty');
      return undefined;
    }
    return value;
  }

  boolean(field: PlainField): boolean | undefined {
    const value = field.node?.value;
    if (typeof value === 'boolean') return value;
    this.report(this.at(field), field.path, `expected true or false, got ${this.describe(field.node)}`);
    return undefined;
  }

  number(field: PlainField, rule: NumberRule = {}): number | undefined {
    const node = field.node;
    const value = node?.value;
    const kind = rule.integer ? 'an integer' : 'a number';
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      this.report(this.at(field), field.path, `expected ${kind}, got ${this.describe(node)}`);
      return undefined;
    }
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

  describe(node: PlainNode | null | undefined): string {
    if (this.isNull(node)) return 'nothing';
    const value = node?.value;
    if (Array.isArray(value)) return 'a list';
    if (isMapping(value)) return 'a mapping';
    switch (typeof value) {
      case 'string':
        return 'a string';
      case 'number':
        return 'a number';
      case 'boolean':
        return 'a boolean';
    }
    return 'an unsupported value';
  }
}

export function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isScalar(value: unknown): boolean {
  return value === null || ['string', 'number', 'boolean'].includes(typeof value);
}

function describeRange(rule: NumberRule): string {
  const parts: string[] = [];
  if (rule.min !== undefined) parts.push(rule.minExclusive ? `> ${rule.min}` : `>= ${rule.min}`);
  if (rule.max !== undefined) parts.push(`<= ${rule.max}`);
  return `must be ${parts.join(' and ')}`;
}
