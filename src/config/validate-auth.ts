import { dirname, resolve } from 'node:path';
import { readAuthorization } from '../policy/authorization.ts';
import type { FileOutcome, PolicyContext } from '../policy/context.ts';
import type { PlainField } from '../policy/plain-reader.ts';
import { FileCheckError, readCaBundle, readJwksFile } from './file-checks.ts';
import { plainView } from './plain-yaml.ts';
import { rememberPosition } from './positions.ts';
import type { AuthorizationConfig } from './types.ts';
import type { Field, YamlReader } from './yaml-reader.ts';

/**
 * An upstreams.yaml `authorization` object, read by the one policy reader (policy/authorization)
 * over its plain value: this file gives it the file's context (its files, read relative to it) and
 * the problems their file:line:column afterwards (config/plain-yaml).
 */
export function validateAuthorization(r: YamlReader, field: Field): AuthorizationConfig | null {
  const view = plainView(r, [field]);
  const read = readAuthorization(view.reader, view.fields.get(field.key) as PlainField, fileContext(r));
  view.finish();
  // The provider is checked against main.yaml once both files are read (config/validate-oidc), at its line.
  const provider = view.nodeOf({ segments: [field.key, 'provider'], side: 'value' });
  if (read?.oidc !== undefined && provider !== null)
    rememberPosition(read.oidc, 'provider', { file: r.file, ...r.positionOf(provider) });
  return read;
}

/** What a file's policy may read: files relative to the file, with the readers start uses. */
function fileContext(r: YamlReader): PolicyContext {
  const check = (value: string, read: (path: string) => unknown): FileOutcome => {
    const path = resolve(dirname(r.file), value);
    try {
      read(path);
    } catch (error) {
      if (!(error instanceof FileCheckError)) throw error;
      return { problem: error.message };
    }
    return { path };
  };
  return {
    files: {
      jwks: (value) => check(value, readJwksFile),
      caBundle: (value) => check(value, (path) => readCaBundle(path, 'ca_file')),
    },
  };
}
