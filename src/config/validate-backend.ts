import { isIP } from 'node:net';
import { isMap } from 'yaml';
import { isHostname } from '../routing/normalise.ts';
import type { FixedRedirect, PathConfig, PathTimeouts, ServerAddress } from './types.ts';
import type { Field, Item, YamlReader } from './yaml-reader.ts';

/**
 * The backend-side path policies of upstreams.yaml (docs/configuration.md "Backend policies"):
 * `timeouts`, `upstream_host`, `redirect`, weighted `servers` entries and `signin_url` variables.
 * validate-upstreams calls in here with a line or two; the Ingress source fills the same fields.
 */

export const BACKEND_PATH_KEYS = ['timeouts', 'upstream_host', 'redirect'] as const;
const TIMEOUT_KEYS = ['connect_seconds', 'response_seconds', 'idle_seconds'];
const SERVER_KEYS = ['address', 'weight'];
const REDIRECT_KEYS = ['url', 'code'];
export const REDIRECT_CODES: readonly FixedRedirect['code'][] = [301, 302, 303, 307, 308];
/** setTimeout's ceiling, in seconds: a longer timeout would fire at once. */
export const MAX_TIMEOUT_SECONDS = 2_147_483;
/** A weight is a share, not a count: a bound keeps the balancer's sums small integers. */
export const MAX_WEIGHT = 1_000_000;

type BackendPolicies = Pick<PathConfig, 'timeouts' | 'upstreamHost' | 'redirect'>;

/** The path's backend policies, only those written (so configs without them compare as before). */
export function readBackendPolicies(r: YamlReader, fields: Map<string, Field>): Partial<BackendPolicies> {
  const get = (key: string): Field | undefined => r.given(fields, key);
  const result: Partial<BackendPolicies> = {};
  const timeouts = get('timeouts');
  if (timeouts) result.timeouts = readTimeouts(r, timeouts);
  const host = get('upstream_host');
  if (host) result.upstreamHost = readUpstreamHost(r, host);
  const redirect = get('redirect');
  if (redirect) result.redirect = readRedirect(r, redirect);
  if (redirect && get('redirect_to'))
    r.report(redirect.keyNode, redirect.path, "a path takes 'redirect' or 'redirect_to', not both");
  return result;
}

function readTimeouts(r: YamlReader, field: Field): PathTimeouts | null {
  if (!isMap(field.node)) {
    r.report(
      r.at(field),
      field.path,
      `expected { ${TIMEOUT_KEYS.join(', ')} }, got ${r.describe(field.node)}`,
    );
    return null;
  }
  const fields = r.fields(field.node, field.path, TIMEOUT_KEYS);
  if (fields === null) return null;
  const ms = (key: string): number | null => {
    const found = fields.get(key);
    if (found === undefined || r.isNull(found.node)) return null;
    const seconds = r.number(found, { min: 0, minExclusive: true, max: MAX_TIMEOUT_SECONDS });
    return seconds === undefined ? null : Math.round(seconds * 1000);
  };
  return { connectMs: ms('connect_seconds'), responseMs: ms('response_seconds'), idleMs: ms('idle_seconds') };
}

/** `upstream_host`: the Host header sent upstream instead of the client's, a host name or IP with an optional port. */
function readUpstreamHost(r: YamlReader, field: Field): string | null {
  const text = r.string(field);
  if (text === undefined) return null;
  const problem = upstreamHostProblem(text);
  if (problem === null) return text.toLowerCase();
  r.report(r.at(field), field.path, problem);
  return null;
}

/** Why `text` cannot be sent as a Host header, or null: a host name, IPv4 or [IPv6], optional `:port`. */
export function upstreamHostProblem(text: string): string | null {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+)(?::([0-9]{1,5}))?$/.exec(text);
  const host = match?.[1] ?? '';
  const port = match?.[2];
  const hostOk = host.startsWith('[') ? isIP(host.slice(1, -1)) === 6 : isIP(host) === 4 || isHostname(host);
  if (match === null || !hostOk || (port !== undefined && (Number(port) < 1 || Number(port) > 65535)))
    return `'${text}' is not a host name or IP address with an optional :port`;
  return null;
}

function readRedirect(r: YamlReader, field: Field): FixedRedirect | null {
  if (!isMap(field.node)) {
    r.report(r.at(field), field.path, `expected { url, code }, got ${r.describe(field.node)}`);
    return null;
  }
  const fields = r.fields(field.node, field.path, REDIRECT_KEYS);
  if (fields === null) return null;
  const urlField = fields.get('url');
  const codeField = fields.get('code');
  if (urlField === undefined || r.isNull(urlField.node)) {
    r.report(field.keyNode, field.path, "missing 'url'");
    return null;
  }
  const text = r.string(urlField);
  const problem = text === undefined ? null : redirectUrlProblem(text);
  if (problem !== null) r.report(r.at(urlField), urlField.path, problem);
  let code: FixedRedirect['code'] = 301;
  if (codeField !== undefined && !r.isNull(codeField.node)) {
    const value = r.number(codeField, { integer: true });
    const known = REDIRECT_CODES.find((candidate) => candidate === value);
    if (known !== undefined) code = known;
    else if (value !== undefined) {
      r.report(
        r.at(codeField),
        codeField.path,
        `${value} is not a redirect code (${REDIRECT_CODES.join(', ')})`,
      );
      return null;
    }
  }
  return text === undefined || problem !== null ? null : { url: text, code };
}

/** Why `text` cannot be a redirect's Location, or null: an absolute http(s) URL on one line. */
export function redirectUrlProblem(text: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    return 'must be an absolute http:// or https:// URL';
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    return `must be an http:// or https:// URL, not ${parsed.protocol}`;
  // Sent as a header value as written: nothing that could end the line or needs quoting.
  if (!/^[\x21-\x7e]+$/.test(text)) return 'must be printable ASCII without spaces (percent-encode the rest)';
  return null;
}

/**
 * A `servers` entry written `{ address, weight }`: the address text and its weight, or undefined
 * (reported). A plain string entry has weight 1.
 */
export function readWeightedServer(r: YamlReader, item: Item): { text: string; weight: number } | undefined {
  const fields = r.fields(item.node, item.path, SERVER_KEYS);
  if (fields === null) return undefined;
  const address = fields.get('address');
  const weightField = fields.get('weight');
  if (address === undefined || r.isNull(address.node)) {
    r.report(item.node, item.path, "missing 'address'");
    return undefined;
  }
  const text = r.string(address);
  const weight =
    weightField === undefined || r.isNull(weightField.node)
      ? 1
      : r.number(weightField, { integer: true, min: 0, max: MAX_WEIGHT });
  return text === undefined || weight === undefined ? undefined : { text, weight };
}

/** Weights that leave no server any traffic are a mistake, not a way to switch a path off. */
export function checkWeights(r: YamlReader, field: Field, servers: readonly ServerAddress[]): void {
  if (servers.length === 0 || !servers.some((server) => server.weight !== undefined)) return;
  const total = servers.reduce((sum, server) => sum + (server.weight ?? 1), 0);
  if (total === 0)
    r.report(
      r.at(field),
      field.path,
      'the weights sum to 0: no server would get a request (give one a weight > 0)',
    );
}
