import { RE2JS } from 're2js';

/**
 * Regular expressions over request paths (docs/policies.md#rewrite), run by re2js: a JavaScript port
 * of RE2 whose matching time is linear in the path's length whatever the pattern, so a pattern such
 * as `^(a+)+$` cannot make a request hang (docs/decisions.md, "Linear-time path patterns"). RE2's
 * syntax has no backreferences or lookaround, the constructs that need backtracking: a pattern using
 * them does not compile, and validation refuses it with RE2's reason.
 */
export interface PathPattern {
  /** The pattern as written (logs, docs). */
  readonly source: string;
  /** Number of capture groups: `$1`…`$n` of a replacement. */
  readonly groups: number;
  /** True when the pattern matches somewhere in `path` (anchor it with `^` to match from the start). */
  test(path: string): boolean;
  /** The groups of the first match (index 0 the whole match, unmatched groups ''), or null. */
  exec(path: string): readonly string[] | null;
}

export type Compiled<T> = { ok: true; value: T } | { ok: false; reason: string };

/** Longest pattern accepted: a path pattern is a line, not a program (bounds compile time and memory). */
export const MAX_PATTERN_LENGTH = 1024;

export function compilePathPattern(
  source: string,
  options: { caseInsensitive?: boolean } = {},
): Compiled<PathPattern> {
  if (source.length > MAX_PATTERN_LENGTH)
    return { ok: false, reason: `is longer than ${MAX_PATTERN_LENGTH} characters` };
  const simple = options.caseInsensitive ? null : LITERAL_THEN_REST.exec(source);
  if (simple !== null) return { ok: true, value: literalThenRest(source, simple[1] as string) };
  let re: RE2JS;
  try {
    re = RE2JS.compile(source, options.caseInsensitive ? RE2JS.CASE_INSENSITIVE : 0);
  } catch (error) {
    return {
      ok: false,
      reason: `is not a linear-time (RE2) regular expression: ${(error as Error).message}`,
    };
  }
  const groups = re.groupCount();
  return {
    ok: true,
    value: Object.freeze({
      source,
      groups,
      test: (path: string) => re.test(path),
      exec(path: string): readonly string[] | null {
        // re2js's exec is about twice as fast as a Matcher with group() calls (docs/decisions.md).
        const found = re.exec(path) as Array<string | undefined> | null;
        if (found === null) return null;
        for (let i = 0; i <= groups; i++) found[i] ??= '';
        return found as string[];
      },
    }),
  };
}

/**
 * `^/literal/(.*)` (optionally ending in `$`), the shape most rewrites take: the same answers as RE2
 * gives (a path has no newline for `.` to miss), from startsWith and slice, at a tenth of the cost.
 */
const LITERAL_THEN_REST = /^\^([^.^$*+?()[\]{}|\\]*)\(\.\*\)\$?$/;

function literalThenRest(source: string, literal: string): PathPattern {
  return Object.freeze({
    source,
    groups: 1,
    test: (path: string) => path.startsWith(literal),
    exec: (path: string) => (path.startsWith(literal) ? [path, path.slice(literal.length)] : null),
  });
}

/**
 * A replacement such as `/v2/$1` split once into literal text and group numbers, so a request only
 * concatenates. `$1`…`$9` and `${12}` name groups; `$$` is a literal `$`. Refused: a group the
 * pattern does not have, a `$` followed by anything else.
 */
export type Replacement = readonly (string | number)[];

export function parseReplacement(text: string, groups: number): Compiled<Replacement> {
  const parts: (string | number)[] = [];
  let literal = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (c !== '$') {
      literal += c;
      continue;
    }
    const next = text[i + 1];
    let group: number;
    if (next === '$') {
      literal += '$';
      i++;
      continue;
    }
    if (next !== undefined && next >= '0' && next <= '9') {
      group = Number(next);
      i++;
    } else if (next === '{') {
      const close = text.indexOf('}', i);
      const digits = close === -1 ? '' : text.slice(i + 2, close);
      if (!/^[0-9]{1,3}$/.test(digits))
        return {
          ok: false,
          reason: `'\${' at character ${i + 1} must be followed by a group number and '}'`,
        };
      group = Number(digits);
      i = close;
    } else
      return {
        ok: false,
        reason: `'$' at character ${i + 1} must name a group ($1, \${12}) or be written $$`,
      };
    if (group > groups)
      return { ok: false, reason: `names group $${group}, but the pattern has ${groups} capture group(s)` };
    if (literal !== '') parts.push(literal);
    literal = '';
    parts.push(group);
  }
  if (literal !== '') parts.push(literal);
  return { ok: true, value: Object.freeze(parts) };
}

/** The replacement with the groups of a match filled in. */
export function expandReplacement(replacement: Replacement, groups: readonly string[]): string {
  let out = '';
  for (const part of replacement) out += typeof part === 'number' ? (groups[part] ?? '') : part;
  return out;
}
