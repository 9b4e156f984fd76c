import type { AllowRules } from '../config/types.ts';
import type { Identity, ProxyRequest } from '../request/record.ts';
import type { Authenticator, AuthOutcome } from './authenticator.ts';
import { commonNameCheck, sanPatternCheck } from './client-certificate.ts';

export type { Identity };

/**
 * Whether an `email_verified` claim vouches for the address (docs/authentication.md#who-may-pass):
 * only boolean `true` or the string `"true"` do (some providers send booleans as strings); `"false"`,
 * numbers and anything else do not. A missing claim counts as verified unless the provider says
 * `require_verified_email: true`.
 */
export function emailIsVerified(value: unknown, requireVerifiedEmail: boolean): boolean {
  if (value === undefined) return !requireVerifiedEmail;
  return value === true || value === 'true';
}

/**
 * An identity from OpenID claims: `email` only when verified (an unverified address proves nothing,
 * see emailIsVerified), groups from `groupsClaim` (a list, or one string).
 */
export function identityFromClaims(
  subject: string,
  claims: Readonly<Record<string, unknown>>,
  groupsClaim: string,
  requireVerifiedEmail = false,
): Identity {
  const email =
    typeof claims.email === 'string' && emailIsVerified(claims.email_verified, requireVerifiedEmail)
      ? claims.email
      : null;
  const raw = claims[groupsClaim];
  const groups = Array.isArray(raw)
    ? raw.filter((group): group is string => typeof group === 'string')
    : typeof raw === 'string'
      ? [raw]
      : [];
  return { subject, email, groups, claims };
}

/**
 * The allow rules of a policy as a predicate (docs/authentication.md#who-may-pass): each key
 * present must match (AND), any of its values matches (OR). Comparisons are exact, except emails and
 * domains (case-insensitive). An email with more than one `@` matches nothing: `a@b.com@evil.com`
 * must not pass for `evil.com` nor for `a@b.com`.
 */
export function createAllowCheck(rules: AllowRules): (request: ProxyRequest) => boolean {
  const subjects = rules.subjects === null ? null : new Set(rules.subjects);
  const emails = rules.emails === null ? null : new Set(rules.emails);
  const domains = rules.emailDomains === null ? null : new Set(rules.emailDomains);
  const groups = rules.groups === null ? null : new Set(rules.groups);
  const claims =
    rules.claims === null
      ? null
      : Object.entries(rules.claims).map(([name, values]) => [name, new Set(values)] as const);
  // uri_sans / dns_sans: on the verified client certificate (auth/client-certificate).
  const sans = sanPatternCheck(rules.uriSans ?? null, rules.dnsSans ?? null);
  const commonNames = commonNameCheck(rules.commonNames ?? null);
  return (request) => {
    if (sans !== null && !sans(request.req)) return false;
    if (commonNames !== null && !commonNames(request.req)) return false;
    const identity = request.identity;
    const subject = identity?.subject ?? decodedSubject(request.subject);
    if (subjects !== null && (subject === null || !subjects.has(subject))) return false;
    if (emails !== null || domains !== null) {
      const email = singleAtEmail(identity?.email ?? null);
      if (email === null) return false;
      if (emails !== null && !emails.has(email)) return false;
      if (domains !== null && !domains.has(email.slice(email.indexOf('@') + 1))) return false;
    }
    if (groups !== null && !(identity?.groups ?? []).some((group) => groups.has(group))) return false;
    if (claims !== null) {
      for (const [name, values] of claims) {
        if (!claimMatches(identity?.claims[name], values)) return false;
      }
    }
    return true;
  };
}

/** The authenticator, refusing with `forbidden` whoever it accepts but the rules do not. */
export function withAllowRules(authenticator: Authenticator, rules: AllowRules): Authenticator {
  const allowed = createAllowCheck(rules);
  const decide = (request: ProxyRequest, outcome: AuthOutcome): AuthOutcome =>
    outcome === null && !allowed(request) ? 'forbidden' : outcome;
  return (request, carriers) => {
    const outcome = authenticator(request, carriers);
    return outcome instanceof Promise
      ? outcome.then((settled) => decide(request, settled))
      : decide(request, outcome);
  };
}

/** request.subject is the header form (auth/authenticator subjectHeaderValue); this reverses it. */
function decodedSubject(subject: string | null): string | null {
  if (subject === null) return null;
  try {
    return decodeURIComponent(subject);
  } catch {
    return null;
  }
}

function singleAtEmail(email: string | null): string | null {
  if (email === null) return null;
  const at = email.indexOf('@');
  if (at <= 0 || at !== email.lastIndexOf('@') || at === email.length - 1) return null;
  return email.toLowerCase();
}

/**
 * A top-level claim must be a listed value, or a list holding one; numbers and booleans compare as
 * text. Nothing nested: a list inside a list, or an object, matches nothing (a claim shaped
 * `[["admin"]]` or `{"role": "admin"}` says something else than "admin").
 */
export function claimMatches(value: unknown, allowed: ReadonlySet<string>): boolean {
  if (Array.isArray(value)) return value.some((entry) => scalarMatches(entry, allowed));
  return scalarMatches(value, allowed);
}

function scalarMatches(value: unknown, allowed: ReadonlySet<string>): boolean {
  if (typeof value === 'string') return allowed.has(value);
  if (typeof value === 'number' || typeof value === 'boolean') return allowed.has(String(value));
  return false;
}
