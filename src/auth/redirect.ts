/**
 * Where a login may send the browser back to (docs/authentication.md#openid-connect): a path on the
 * same host, never an absolute URL. Each rule closes a way other proxies were tricked into an open
 * redirect: `//evil.com` and `/\evil.com` (browsers read both as another host), control characters
 * and whitespace (stripped by browsers, so `/\t/evil.com` becomes `//evil.com`), and backslashes
 * anywhere. Anything refused becomes `/`.
 */
export function sameHostTarget(target: string | null | undefined): string {
  if (typeof target !== 'string' || target.length === 0 || target.length > 8192) return '/';
  if (target.charCodeAt(0) !== 0x2f) return '/';
  const second = target.charCodeAt(1);
  if (second === 0x2f || second === 0x5c) return '/';
  // Controls, whitespace, DEL and backslashes: never part of a path we forwarded ourselves.
  for (let i = 0; i < target.length; i++) {
    const code = target.charCodeAt(i);
    if (code <= 0x20 || code === 0x7f || code === 0x5c) return '/';
  }
  return target;
}
