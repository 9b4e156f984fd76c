import { timingSafeEqual } from 'node:crypto';
import type { AuthorizationConfig } from '../config/types.ts';
import { type Authenticator, subjectHeaderValue } from './authenticator.ts';
import { sha256 } from './compare.ts';

/**
 * `x-api-key` against a policy's named `keys`. Every configured key is compared on every request
 * (no early exit), so the time taken says nothing about which key, if any, came close.
 */
export function createApiKeyAuthenticator(policy: AuthorizationConfig): Authenticator {
  const keys = policy.keys.map((key) => ({ subject: subjectHeaderValue(key.name), digest: sha256(key.key) }));

  return (request) => {
    const given = request.req.headers['x-api-key'];
    if (given === undefined || given === '') return 'missing_credentials';
    // A repeated header arrives joined (or as an array): never a single configured key.
    if (typeof given !== 'string') return 'invalid_credentials';
    const digest = sha256(given);
    let subject: string | null = null;
    for (const key of keys) {
      if (timingSafeEqual(digest, key.digest) && subject === null) subject = key.subject;
    }
    if (subject === null) return 'invalid_credentials';
    request.subject = subject;
    request.consumedHeaders.push('x-api-key');
    return null;
  };
}
