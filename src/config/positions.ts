import type { ConfigIssue } from './types.ts';

/** Where a key's value was written: file, line and column (1-based; 0 when unknown). */
export interface Position {
  file: string;
  line: number;
  column: number;
}

/**
 * Where a parsed config wrote some of its keys, recorded by the loader and the validators, so checks
 * that run after validation (the masterkey agreement, the files read at runtime) can point at the
 * line without the domain types carrying YAML positions. Configs built in code have none.
 */
const positions = new WeakMap<object, Map<string, Position>>();

export function rememberPosition(owner: object, key: string, at: Position): void {
  const known = positions.get(owner) ?? new Map<string, Position>();
  known.set(key, at);
  positions.set(owner, known);
}

export function positionOf(owner: object | null, key: string): Position | undefined {
  return owner === null ? undefined : positions.get(owner)?.get(key);
}

/**
 * One issue about `key` of `owner`: at the line that set it when the loader recorded it, else at the
 * top of `fallbackFile`. `path` defaults to the key (the YAML path of a top-level key).
 */
export function issueAt(
  owner: object | null,
  key: string,
  fallbackFile: string,
  message: string,
  path = key,
): ConfigIssue {
  const at = positionOf(owner, key) ?? { file: fallbackFile, line: 0, column: 0 };
  return { ...at, path, message };
}
