import { unconfigurableHeaderReason } from '../header-names.ts';
import { httpUrlProblem } from '../policy/forward.ts';
import type { Field, YamlReader } from './yaml-reader.ts';

/** An absolute http(s) URL without a fragment. */
export function readHttpUrl(r: YamlReader, field: Field): string | undefined {
  const text = r.string(field);
  if (text === undefined) return undefined;
  const problem = httpUrlProblem(text);
  if (problem === null) return text;
  r.report(r.at(field), field.path, problem);
  return undefined;
}

/** `name` in lower case when a config may name it, else undefined (reported at `node`). */
export function checkHeaderName(
  r: YamlReader,
  name: string,
  node: Field['node'],
  path: string,
): string | undefined {
  const problem = unconfigurableHeaderReason(name);
  if (problem !== null) {
    r.report(node, path, problem);
    return undefined;
  }
  return name.toLowerCase();
}
