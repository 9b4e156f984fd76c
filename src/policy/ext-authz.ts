import { isIP } from 'node:net';
import type { ExtAuthzSettings } from '../config/types.ts';
import { authUrlTargetProblem } from './auth-url-guard.ts';
import type { PolicyContext } from './context.ts';
import { NOT_A_POD_FILE } from './jwt.ts';
import type { PlainField as Field, PlainReader } from './plain-reader.ts';

/** Keys that only make sense with `type: ext_authz` (docs/authentication.md#external-authorization). */
export const EXT_AUTHZ_KEYS = ['grpc', 'timeout_ms', 'include_body_bytes', 'fail_open'] as const;
const GRPC_KEYS = ['address', 'tls'] as const;
const TLS_KEYS = ['ca_file', 'server_name'] as const;
const DEFAULT_TIMEOUT_MS = 300;
const MAX_TIMEOUT_MS = 60_000;
/** A check carries at most this much of a body (Envoy's max_request_bytes is as bounded). */
const MAX_BODY_BYTES = 1024 * 1024;
const HOST =
  /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/;

/**
 * `grpc: { address: "host:port", tls: false | true | { ca_file, server_name } }`, `timeout_ms`,
 * `include_body_bytes`, `fail_open`. A `ca_file` is read now, with the reader the running process
 * uses, so a broken one stops the start, `validate` or the reload at its line. From a Kubernetes
 * object the service may not be Tollgate's pod itself (auth-url-guard.ts) and no file is named.
 */
export function readExtAuthzSettings(
  r: PlainReader,
  parent: Field,
  fields: Map<string, Field>,
  context: PolicyContext,
): ExtAuthzSettings | null {
  const get = (key: string): Field | undefined => r.given(fields, key);
  const grpcField = get('grpc');
  if (grpcField === undefined) {
    r.report(
      parent.keyNode,
      parent.path,
      "ext_authz needs 'grpc: { address }': the authorization service to ask",
    );
    return null;
  }
  const grpc = r.fields(grpcField.node, grpcField.path, GRPC_KEYS);
  if (grpc === null) return null;
  const addressField = grpc.get('address');
  let address: string | undefined;
  if (addressField === undefined || r.isNull(addressField.node)) {
    r.report(grpcField.keyNode, grpcField.path, "needs 'address' (host:port)");
  } else {
    const text = r.string(addressField);
    if (text !== undefined) {
      const target =
        context.kubernetes === undefined
          ? null
          : authUrlTargetProblem(`http://${text}/`, context.kubernetes.reachesTollgate);
      if (!validAddress(text)) r.report(r.at(addressField), addressField.path, `'${text}' is not host:port`);
      else if (target !== null)
        r.report(r.at(addressField), addressField.path, `${target}: checks may not be sent there`);
      else address = text;
    }
  }
  const tlsField = grpc.get('tls');
  const tls = tlsField === undefined || r.isNull(tlsField.node) ? null : readTls(r, tlsField, context);
  const timeoutField = get('timeout_ms');
  const timeoutMs = timeoutField
    ? r.number(timeoutField, { integer: true, min: 1, max: MAX_TIMEOUT_MS })
    : DEFAULT_TIMEOUT_MS;
  const bodyField = get('include_body_bytes');
  const includeBodyBytes = bodyField
    ? r.number(bodyField, { integer: true, min: 0, max: MAX_BODY_BYTES })
    : 0;
  const failOpenField = get('fail_open');
  const failOpen = failOpenField ? r.boolean(failOpenField) : false;
  if (
    address === undefined ||
    tls === undefined ||
    timeoutMs === undefined ||
    includeBodyBytes === undefined ||
    failOpen === undefined
  )
    return null;
  return { address, tls, timeoutMs, includeBodyBytes, failOpen };
}

function readTls(r: PlainReader, field: Field, context: PolicyContext): ExtAuthzSettings['tls'] | undefined {
  if (field.node !== null && typeof (field.node as { value?: unknown }).value === 'boolean') {
    const on = r.boolean(field);
    return on === undefined ? undefined : on ? { caFile: null, serverName: null } : null;
  }
  const fields = r.fields(field.node, field.path, TLS_KEYS);
  if (fields === null) return undefined;
  let ok = true;
  let caFile: string | null = null;
  const caField = fields.get('ca_file');
  if (caField !== undefined && !r.isNull(caField.node)) {
    const text = r.string(caField);
    if (text === undefined) ok = false;
    else {
      const outcome =
        context.files === undefined ? { problem: NOT_A_POD_FILE } : context.files.caBundle(text);
      if ('problem' in outcome) {
        r.report(r.at(caField), caField.path, outcome.problem);
        ok = false;
      } else caFile = outcome.path;
    }
  }
  let serverName: string | null = null;
  const nameField = fields.get('server_name');
  if (nameField !== undefined && !r.isNull(nameField.node)) {
    const name = r.string(nameField);
    if (name !== undefined && HOST.test(name)) serverName = name.toLowerCase();
    else {
      ok = false;
      if (name !== undefined) r.report(r.at(nameField), nameField.path, `'${name}' is not a host name`);
    }
  }
  return ok ? { caFile, serverName } : undefined;
}

function validAddress(text: string): boolean {
  const match = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(text);
  if (match === null) return false;
  const host = (match[1] as string).replace(/^\[|\]$/g, '');
  const port = Number(match[2]);
  return port >= 1 && port <= 65_535 && (isIP(host) !== 0 || HOST.test(host));
}
