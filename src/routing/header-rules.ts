import type { HeaderOps } from '../config/types.ts';
import { normaliseHeaderName } from '../header-names.ts';

/**
 * Header rules as the hot path applies them (docs/configuration.md#header-rules): every copy of a name
 * in `drop` is removed (the `remove` and `set` names), then `append` is written in order (the `set`
 * values, then the `add` ones). Frozen, on the Route.
 */
export interface HeaderRules {
  /** Normalised names (lower case, `_` read as `-`, as upstream/headers.ts compares them). */
  readonly drop: ReadonlySet<string>;
  /** Flat `[name, value, name, value…]`, lower-case names. */
  readonly append: readonly string[];
  /** The `add` names, for responses: appended beside the upstream's own copies, not replacing them. */
  readonly added: ReadonlySet<string>;
}

/**
 * The rules of a route: the path's rule for a name wins over the global one for that name; the
 * global rules for every other name still apply. null when neither level has any.
 */
export function compileHeaderRules(global: HeaderOps | null, path: HeaderOps | null): HeaderRules | null {
  const pathNames = new Set<string>();
  if (path !== null) {
    for (const { name } of [...path.set, ...path.add]) pathNames.add(name);
    for (const name of path.remove) pathNames.add(name);
  }
  const inherited = (names: readonly string[]) => names.filter((name) => !pathNames.has(name));
  const inheritedValues = <T extends { name: string }>(values: readonly T[]) =>
    values.filter((value) => !pathNames.has(value.name));
  const set = [...(global ? inheritedValues(global.set) : []), ...(path?.set ?? [])];
  const add = [...(global ? inheritedValues(global.add) : []), ...(path?.add ?? [])];
  const remove = [...(global ? inherited(global.remove) : []), ...(path?.remove ?? [])];
  if (set.length === 0 && add.length === 0 && remove.length === 0) return null;
  const drop = new Set<string>([...remove, ...set.map((value) => value.name)].map(normaliseHeaderName));
  const append: string[] = [];
  for (const { name, value } of [...set, ...add]) append.push(name, value);
  return Object.freeze({
    drop,
    append: Object.freeze(append),
    added: new Set(add.map((value) => value.name)),
  });
}
