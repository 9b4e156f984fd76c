import type { Node } from 'yaml';
import type { ClientCertificateSettings } from './types.ts';
import type { Field, YamlReader } from './yaml-reader.ts';

/**
 * main.yaml `tls_client_certificates` and `tls_certificates[].client_certificates`
 * (docs/authentication.md#client-certificates); the keys of `type: client_certificate` are read by
 * policy/client-certificate. The files themselves are read by config/file-checks (validate = start).
 */

const SETTINGS_KEYS = ['ca_file', 'mode', 'verify_depth', 'crl_file'] as const;
const MODES = ['require', 'optional'] as const;
/** Deeper chains than this are no client-certificate setup anyone runs; a typo more likely. */
const MAX_VERIFY_DEPTH = 8;

/** A `{ca_file, mode, verify_depth, crl_file}` block; undefined after reporting what is wrong. */
export function readClientCertificateSettings(
  r: YamlReader,
  field: Field,
  filePath: (field: Field) => string | undefined,
  positions: Array<[string, Node]>,
): ClientCertificateSettings | undefined {
  const fields = r.fields(field.node, field.path, SETTINGS_KEYS);
  if (fields === null) return undefined;
  const get = (key: string): Field | undefined => r.given(fields, key);
  const path = (key: string) => {
    const entry = get(key);
    if (entry === undefined) return undefined;
    const value = filePath(entry);
    // Where the file was written, so a file check's error points at this line.
    if (value !== undefined && entry.node) positions.push([entry.path, entry.node]);
    return value;
  };
  const caField = get('ca_file');
  if (caField === undefined) {
    r.report(field.keyNode, field.path, "needs 'ca_file': the CA bundle client certificates must chain to");
    return undefined;
  }
  const caFile = path('ca_file');
  const modeField = get('mode');
  let mode: ClientCertificateSettings['mode'] | undefined = 'require';
  if (modeField !== undefined) {
    const text = r.string(modeField);
    mode = MODES.find((candidate) => candidate === text);
    if (text !== undefined && mode === undefined)
      r.report(r.at(modeField), modeField.path, `unknown mode '${text}' (expected require or optional)`);
  }
  const depthField = get('verify_depth');
  const verifyDepth = depthField ? r.number(depthField, { integer: true, min: 1, max: MAX_VERIFY_DEPTH }) : 1;
  const crlFile = get('crl_file') === undefined ? null : path('crl_file');
  if (caFile === undefined || mode === undefined || verifyDepth === undefined || crlFile === undefined)
    return undefined;
  return { caFile, crlFile, mode, verifyDepth };
}
