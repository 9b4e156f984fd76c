import { checkSigninTemplate, sampleSigninUrl } from '../auth/signin-url.ts';

/**
 * Why `text` cannot be a sign-in URL template, or null: an absolute http(s) URL that may use `$scheme`,
 * `$host`, `$request_uri` and `$escaped_request_uri` (auth/signin-url); any other `$variable` is
 * refused, named. Shared by forward auth's `signin_url` (policy/forward) and the Ingress `auth-signin`.
 */
export function signinUrlProblem(text: string): string | null {
  const checked = checkSigninTemplate(text);
  if (!checked.ok) return checked.message;
  const sample = sampleSigninUrl(text);
  let parsed: URL;
  try {
    parsed = new URL(sample);
  } catch {
    return 'must be an absolute http:// or https:// URL';
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    return `must be an http:// or https:// URL, not ${parsed.protocol}`;
  if (parsed.hash !== '' || text.includes('#')) return 'must not have a #fragment';
  if (!/^[\x21-\x7e]+$/.test(text)) return 'must be printable ASCII without spaces (percent-encode the rest)';
  return null;
}
