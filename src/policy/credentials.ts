import { parseStoredHash } from '../auth/password.ts';
import type { BasicUser, NamedApiKey } from '../config/types.ts';

/** Users or keys read from an Ingress's auth Secret, with what the Ingress is told about them. */
export interface ParsedCredentials<T> {
  entries: T[];
  /** The Secret cannot be used at all: the paths stay closed. */
  problems: string[];
  /** Usable, but the owner should act (weak hashes). */
  warnings: string[];
}

/**
 * An htpasswd file (`user:hash` per line, ingress-nginx's `auth-file`; docs/ingress.md): bcrypt and
 * Tollgate's scrypt accepted, `$apr1$` and `{SHA}` accepted with a warning, anything else refused (a
 * plain-text password above all: htpasswd never writes one, so it is a mistake, not a choice).
 */
export function parseHtpasswd(text: string): ParsedCredentials<BasicUser> {
  const pairs: Array<[string, string]> = [];
  const problems: string[] = [];
  text.split(/\r?\n/).forEach((line, index) => {
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) return;
    const colon = trimmed.indexOf(':');
    if (colon <= 0) {
      problems.push(`line ${index + 1} is not 'user:hash'`);
      return;
    }
    pairs.push([trimmed.slice(0, colon), trimmed.slice(colon + 1)]);
  });
  const parsed = usersFrom(pairs, (n) => `line ${n}`);
  return { ...parsed, problems: [...problems, ...parsed.problems] };
}

/** ingress-nginx's `auth-map`: one data key per user, its value the hash. */
export function parseAuthMap(data: Record<string, string>): ParsedCredentials<BasicUser> {
  const keys = Object.keys(data).sort();
  return usersFrom(
    keys.map((key) => [key, (data[key] as string).trim()]),
    (n) => `key '${keys[n - 1]}'`,
  );
}

function usersFrom(
  pairs: ReadonlyArray<[string, string]>,
  where: (n: number) => string,
): ParsedCredentials<BasicUser> {
  const entries: BasicUser[] = [];
  const problems: string[] = [];
  const weak = new Set<string>();
  pairs.forEach(([username, hash], index) => {
    const at = where(index + 1);
    if (entries.some((user) => user.username === username)) {
      problems.push(`${at}: user '${username}' is listed twice`);
      return;
    }
    const parsed = parseStoredHash(hash);
    if (parsed === null) {
      problems.push(
        `${at}: the password of '${username}' is not a bcrypt ($2y$), scrypt, $apr1$ or {SHA} hash (plain text is refused)`,
      );
      return;
    }
    if ('kind' in parsed && parsed.kind !== 'bcrypt') weak.add(parsed.kind === 'apr1' ? '$apr1$' : '{SHA}');
    entries.push({ username, password: null, passwordHash: hash });
  });
  if (entries.length === 0 && problems.length === 0) problems.push('it holds no user');
  const warnings = [...weak].map(
    (kind) => `${kind} hashes are weak: rehash with 'htpasswd -B' (bcrypt) or 'tollgate hash-password'`,
  );
  return { entries, problems, warnings };
}

/** API keys, one `name:key` per line (docs/ingress.md). */
export function parseApiKeys(text: string): ParsedCredentials<NamedApiKey> {
  const entries: NamedApiKey[] = [];
  const problems: string[] = [];
  text.split(/\r?\n/).forEach((line, index) => {
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) return;
    const colon = trimmed.indexOf(':');
    const name = trimmed.slice(0, colon);
    const key = trimmed.slice(colon + 1).trim();
    if (colon <= 0 || key === '') {
      problems.push(`line ${index + 1} is not 'name:key'`);
    } else if (entries.some((entry) => entry.name === name)) {
      problems.push(`line ${index + 1}: '${name}' is listed twice`);
    } else entries.push({ name, key });
  });
  if (entries.length === 0 && problems.length === 0) problems.push('it holds no key');
  return { entries, problems, warnings: [] };
}
