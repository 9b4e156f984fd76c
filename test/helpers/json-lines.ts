/**
 * Keys that appear twice in one JSON object of `line` (JSON.parse keeps the last one silently, and
 * so do log pipelines), as dotted paths. `line` must be valid JSON.
 */
export function duplicateKeys(line: string): string[] {
  const found: string[] = [];
  let i = 0;
  const skipSpace = () => {
    while (i < line.length && ' \t\n\r'.includes(line[i] as string)) i++;
  };
  const readString = (): string => {
    const start = i;
    i++;
    while (line[i] !== '"') i += line[i] === '\\' ? 2 : 1;
    i++;
    return JSON.parse(line.slice(start, i)) as string;
  };
  const readValue = (path: string): void => {
    skipSpace();
    const first = line[i];
    if (first === '"') {
      readString();
    } else if (first === '{' || first === '[') {
      const object = first === '{';
      const keys = new Set<string>();
      i++;
      skipSpace();
      let index = 0;
      while (line[i] !== (object ? '}' : ']')) {
        skipSpace();
        let key = String(index++);
        if (object) {
          key = readString();
          if (keys.has(key)) found.push(`${path}${key}`);
          keys.add(key);
          skipSpace();
          i++; // ':'
        }
        readValue(`${path}${key}.`);
        skipSpace();
        if (line[i] === ',') i++;
        skipSpace();
      }
      i++;
    } else {
      while (i < line.length && !',]} \t\n\r'.includes(line[i] as string)) i++;
    }
  };
  readValue('');
  return found;
}

/** Every JSON line of `text` that has a duplicate key, with the keys: what no log line may have. */
export function linesWithDuplicateKeys(text: string): string[] {
  const bad: string[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      JSON.parse(line);
    } catch {
      continue;
    }
    const keys = duplicateKeys(line);
    if (keys.length > 0) bad.push(`duplicate ${keys.join(', ')} in ${line}`);
  }
  return bad;
}

/**
 * Fails the test file when any JSON line of a process's output has a duplicate key
 * (docs/observability.md): the lines go to stderr and the exit code becomes 1. Not a throw, so the
 * caller's cleanup (other servers of an `after` hook) still runs and the file does not hang.
 */
export function reportDuplicateKeys(text: string, who: string): void {
  const bad = linesWithDuplicateKeys(text);
  if (bad.length === 0) return;
  process.stderr.write(`${who} logged ${bad.length} line(s) with a duplicate key:\n${bad.join('\n')}\n`);
  process.exitCode = 1;
}
