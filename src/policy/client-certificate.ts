import type { ClientCertificateAuth, SubjectSource } from '../config/types.ts';
import type { PlainField as Field, PlainReader } from './plain-reader.ts';

/** The keys of `type: client_certificate` (docs/authentication.md#client-certificates). */
export const CLIENT_CERTIFICATE_KEYS = ['subject_from', 'forward_client_certificate'] as const;
const SUBJECT_SOURCES: readonly SubjectSource[] = ['uri_san', 'dns_san', 'email_san', 'cn'];
const FORWARD_FORMS = ['xfcc', 'pem', 'none'] as const;
export const DEFAULT_SUBJECT_FROM: readonly SubjectSource[] = Object.freeze(['uri_san', 'cn']);

/** The keys of `type: client_certificate`; null after reporting. */
export function readClientCertificateAuth(
  r: PlainReader,
  fields: Map<string, Field>,
): ClientCertificateAuth | null {
  const get = (key: string): Field | undefined => r.given(fields, key);
  let ok = true;
  let subjectFrom = [...DEFAULT_SUBJECT_FROM];
  const sourcesField = get('subject_from');
  if (sourcesField !== undefined) {
    subjectFrom = [];
    for (const item of r.items(sourcesField, `a list of ${SUBJECT_SOURCES.join(', ')}`) ?? []) {
      const text = r.string(item);
      const source = SUBJECT_SOURCES.find((candidate) => candidate === text);
      if (source === undefined) {
        ok = false;
        if (text !== undefined)
          r.report(
            item.node,
            item.path,
            `unknown subject source '${text}' (expected ${SUBJECT_SOURCES.join(', ')})`,
          );
      } else if (!subjectFrom.includes(source)) subjectFrom.push(source);
    }
    if (subjectFrom.length === 0 && ok) {
      r.report(r.at(sourcesField), sourcesField.path, 'is empty: name where the subject is read from');
      ok = false;
    }
  }
  let forward: ClientCertificateAuth['forward'] = 'none';
  const forwardField = get('forward_client_certificate');
  if (forwardField !== undefined) {
    const text = r.string(forwardField);
    const form = FORWARD_FORMS.find((candidate) => candidate === text);
    if (form === undefined) {
      ok = false;
      if (text !== undefined)
        r.report(
          r.at(forwardField),
          forwardField.path,
          `unknown form '${text}' (expected xfcc, pem or none)`,
        );
    } else forward = form;
  }
  return ok ? { subjectFrom, forward } : null;
}
