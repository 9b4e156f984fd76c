import type { IncomingMessage } from 'node:http';
import { isGrpcRequest } from '../../local-response.ts';
import type { Identity } from '../../request/record.ts';
import type { AuthDenial } from '../authenticator.ts';
import { OIDC_LOGOUT_PATH, SWITCH_ACCOUNT_PATH } from './endpoints.ts';

/**
 * The pages a person sees when an oidc route refuses them (docs/authentication.md#openid-connect):
 * who they are signed in as, a way to sign out and a way to sign in with another account, instead of
 * JSON. Plain HTML, no script, one inline stylesheet, and a Content-Security-Policy that allows
 * nothing else; every value shown is escaped.
 */

export const PAGE_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

const STYLE =
  'body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#1f2328}' +
  'h1{font-size:1.4rem}form{display:inline}button,a.button{font:inherit;padding:.4rem .9rem;margin-right:.5rem;' +
  'border:1px solid #d0d7de;border-radius:6px;background:#f6f8fa;color:inherit;text-decoration:none;cursor:pointer}' +
  '.muted{color:#59636e;font-size:.9rem}';

/** A person's browser asking for a page (not a script, not gRPC): it gets HTML rather than JSON. */
export function wantsPage(req: IncomingMessage): boolean {
  const accept = req.headers.accept;
  if (accept === undefined || !accept.includes('text/html')) return false;
  if (req.headers['x-requested-with'] !== undefined) return false;
  const mode = req.headers['sec-fetch-mode'];
  if (mode !== undefined && mode !== 'navigate') return false;
  return !isGrpcRequest(req);
}

/** 403 for a signed-in person the route's allow rules refuse. */
export function forbiddenPage(identity: Identity | null, returnTo: string): AuthDenial {
  const who =
    identity === null
      ? 'You are signed in'
      : `You are signed in as <strong>${escapeHtml(identity.subject)}</strong>${
          identity.email === null ? '' : ` (${escapeHtml(identity.email)})`
        }`;
  return page(
    403,
    'forbidden',
    'Access denied',
    `<p>${who}, and this account may not open this page.</p>${actions(returnTo)}`,
  );
}

/** 401 for a browser request that cannot be sent to the login page itself (a form post, say). */
export function signInPage(returnTo: string): AuthDenial {
  return page(
    401,
    'login_required',
    'Sign-in required',
    `<p>This page needs you to sign in.</p><p><a class="button" href="${escapeHtml(switchUrl(returnTo))}">Sign in</a></p>`,
    // As the JSON answer has it: a script reading the status still learns what to bring.
    { 'www-authenticate': 'Bearer realm="tollgate"' },
  );
}

function actions(returnTo: string): string {
  return (
    `<p><form method="post" action="${OIDC_LOGOUT_PATH}"><button type="submit">Sign out</button></form>` +
    `<a class="button" href="${escapeHtml(switchUrl(returnTo))}">Sign in with another account</a></p>`
  );
}

function switchUrl(returnTo: string): string {
  return `${SWITCH_ACCOUNT_PATH}?rd=${encodeURIComponent(returnTo)}`;
}

function page(
  status: number,
  reason: 'forbidden' | 'login_required',
  title: string,
  body: string,
  extraHeaders: Record<string, string> = {},
): AuthDenial {
  const html =
    `<!doctype html><html lang="en"><head><meta charset="utf-8">` +
    `<meta name="viewport" content="width=device-width, initial-scale=1"><title>${title}</title>` +
    `<style>${STYLE}</style></head><body><h1>${title}</h1>${body}` +
    `<p class="muted">${reason}</p></body></html>\n`;
  return {
    reason,
    denial: {
      status,
      headers: {
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-store',
        ...PAGE_SECURITY_HEADERS,
        ...extraHeaders,
      },
      body: Buffer.from(html),
    },
  };
}

const ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (char) => ESCAPES[char] as string);
}
