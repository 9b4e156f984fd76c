import { parseScope, type ScopeEntry } from '../auth/scope.ts';
import { isValidOwner, MAX_OWNER_LENGTH } from '../auth/tokens.ts';

export interface TokenRequest {
  masterKey: string;
  owner: string;
  validMinutes: number;
  /** null: an unscoped token. */
  scope: readonly ScopeEntry[] | null;
}

export type ParsedTokenRequest = { ok: true; request: TokenRequest } | { ok: false; message: string };

const refuse = (message: string): ParsedTokenRequest => ({ ok: false, message });

/**
 * Parses and checks a `POST /jwt` body: `{"master_key": string, "owner": string, "valid": integer}`,
 * with `exp` accepted in place of `valid` (Aralez clients) and an optional `scope` (docs/tokens.md).
 * Every refusal names the field (and for scope, the entry) at fault.
 * Types are strict (no "60" for 60): a client that sends the wrong type has a bug worth hearing about.
 */
export function parseTokenRequest(body: string, maxTokenMinutes: number): ParsedTokenRequest {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return refuse('the body is not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return refuse('the body must be a JSON object with master_key, owner and valid');
  }
  const fields = value as Record<string, unknown>;

  if (typeof fields.master_key !== 'string' || fields.master_key === '') {
    return refuse('master_key is required and must be a non-empty string');
  }
  if (!isValidOwner(fields.owner)) {
    return refuse(
      `owner is required and must be a string of 1 to ${MAX_OWNER_LENGTH} characters of valid Unicode without control characters`,
    );
  }

  const hasValid = fields.valid !== undefined;
  const hasExp = fields.exp !== undefined;
  if (hasValid && hasExp && fields.valid !== fields.exp) {
    return refuse('valid and exp are the same field (exp is an alias); send one of them');
  }
  const minutes = hasValid ? fields.valid : fields.exp;
  const name = hasValid || !hasExp ? 'valid' : 'exp';
  if (minutes === undefined) return refuse('valid is required: the token lifetime in minutes');
  if (typeof minutes !== 'number' || !Number.isInteger(minutes) || minutes < 1 || minutes > maxTokenMinutes) {
    return refuse(`${name} must be an integer number of minutes from 1 to ${maxTokenMinutes}`);
  }
  let scope: readonly ScopeEntry[] | null = null;
  if (fields.scope !== undefined) {
    const parsed = parseScope(fields.scope);
    if (!parsed.ok) return refuse(parsed.message);
    scope = parsed.scope;
  }
  return {
    ok: true,
    request: { masterKey: fields.master_key, owner: fields.owner, validMinutes: minutes, scope },
  };
}
