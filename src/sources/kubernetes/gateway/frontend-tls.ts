import type { V1ConfigMap, V1Secret } from '@kubernetes/client-node';
import { checkClientCaFiles } from '../../../config/file-checks.ts';
import type { ClientCheckPem } from '../ingress/certificates.ts';
import { decodeSecret } from '../secret-data.ts';
import { referencePermitted } from './grants.ts';
import { type FrontendTlsSettings, GATEWAY_GROUP, type Gateway, type ReferenceGrant } from './objects.ts';
import type { Lookup } from './reads.ts';

/**
 * Gateway API client-certificate validation (`Gateway.spec.tls.frontend`, GEP-91;
 * docs/gateway-api.md#client-certificates): the CA certificates of `caCertificateRefs` (ConfigMaps
 * or Secrets with `ca.crt`; another namespace's only with a ReferenceGrant) become the trust store of
 * the HTTPS listeners' certificates, `perPort` overriding `default` for the listeners of its port.
 * `AllowValidOnly` (the default) fails the handshake without a valid certificate; `AllowInsecureFallback`
 * lets the connection on (an unverified certificate is still never an identity).
 */

/** What a translation reads: the objects by `namespace/name`. */
export interface CaObjects {
  secrets: Lookup<V1Secret>;
  configMaps: Lookup<V1ConfigMap>;
}

/**
 * The validation of a listener: its check, a problem for its ResolvedRefs condition, or none.
 * `noValidCa`: not one of the refs resolves, which the spec reports as the listener's `Accepted:
 * False, NoValidCACertificate` besides.
 */
export type FrontendValidation =
  | { check: ClientCheckPem }
  | { problem: { reason: string; message: string }; noValidCa: boolean }
  | null;

type Ref = { group?: string; kind?: string; name?: string; namespace?: string };

/** The validation that applies to an HTTPS listener on `port`. */
function settingsFor(gateway: Gateway, port: number | null): FrontendTlsSettings | undefined {
  const frontend = gateway.spec?.tls?.frontend;
  if (frontend === undefined) return undefined;
  const perPort = (frontend.perPort ?? []).find((entry) => entry.port === port);
  return perPort !== undefined ? perPort.tls : frontend.default;
}

/** The `namespace/name` of the ConfigMaps and Secrets a Gateway's frontend validation names. */
export function frontendCaRefs(gateway: Gateway): { secrets: string[]; configMaps: string[] } {
  const namespace = gateway.metadata?.namespace ?? 'default';
  const frontend = gateway.spec?.tls?.frontend;
  const secrets = new Set<string>();
  const configMaps = new Set<string>();
  const all = [frontend?.default, ...(frontend?.perPort ?? []).map((entry) => entry.tls)];
  for (const settings of all)
    for (const ref of settings?.validation?.caCertificateRefs ?? []) {
      if ((ref.group ?? '') !== '' || !ref.name) continue;
      const key = `${ref.namespace ?? namespace}/${ref.name}`;
      if (ref.kind === 'ConfigMap') configMaps.add(key);
      else if (ref.kind === 'Secret') secrets.add(key);
    }
  return { secrets: [...secrets], configMaps: [...configMaps] };
}

/** The validation of the HTTPS listener of `gateway` on `port` (null: none configured). */
export function frontendValidation(
  gateway: Gateway,
  port: number | null,
  objects: CaObjects,
  grants: readonly ReferenceGrant[],
): FrontendValidation {
  const validation = settingsFor(gateway, port)?.validation;
  if (validation === undefined) return null;
  const namespace = gateway.metadata?.namespace ?? 'default';
  const invalid = (message: string, noValidCa = false, reason = 'InvalidCACertificateRef') => ({
    problem: { reason, message },
    noValidCa,
  });
  const mode = validation.mode ?? 'AllowValidOnly';
  if (mode !== 'AllowValidOnly' && mode !== 'AllowInsecureFallback')
    return invalid(`frontend validation mode ${mode} is not AllowValidOnly or AllowInsecureFallback`);
  const refs = validation.caCertificateRefs ?? [];
  if (refs.length === 0) return invalid('frontend validation names no caCertificateRefs', true);
  const resolved = refs.map((ref) => caOf(ref, namespace, objects, grants));
  const problem = resolved.find((item) => typeof item !== 'string');
  // One ref that does not resolve refuses the whole validation (never a narrower trust store than
  // written, never served unchecked).
  if (problem !== undefined)
    return { problem, noValidCa: resolved.every((item) => typeof item !== 'string') };
  const bundles = (resolved as string[]).map((text) => text.trim());
  const ca = `${bundles.join('\n')}\n`;
  try {
    checkClientCaFiles(
      Buffer.from(ca),
      null,
      { caFile: 'caCertificateRefs', crlFile: null, mode: 'require', verifyDepth: 1 },
      'spec.tls.frontend',
    );
  } catch (error) {
    return invalid((error as Error).message);
  }
  const gatewayName = `${namespace}/${gateway.metadata?.name ?? ''}`;
  return {
    check: {
      key: `gateway ${gatewayName} port ${port ?? '-'}`,
      mode: mode === 'AllowValidOnly' ? 'require' : 'optional',
      // GEP-91 leaves the depth to implementations: a certificate issued by a CA of the bundle.
      verifyDepth: 1,
      ca,
      crl: null,
    },
  };
}

function caOf(
  ref: Ref,
  namespace: string,
  objects: CaObjects,
  grants: readonly ReferenceGrant[],
): string | { reason: string; message: string } {
  const kind = ref.kind ?? '';
  if ((ref.group ?? '') !== '' || (kind !== 'ConfigMap' && kind !== 'Secret'))
    return {
      reason: 'InvalidCACertificateKind',
      message: `caCertificateRef ${ref.group ?? ''}/${kind} is not a core ConfigMap or Secret`,
    };
  const target = ref.namespace ?? namespace;
  const key = `${target}/${ref.name ?? ''}`;
  if (
    !referencePermitted(grants, {
      from: { group: GATEWAY_GROUP, kind: 'Gateway', namespace },
      to: { group: '', kind, namespace: target, name: ref.name ?? '' },
    })
  )
    return {
      reason: 'RefNotPermitted',
      message: `no ReferenceGrant in ${target} allows this Gateway to use ${kind} ${key}`,
    };
  const text =
    kind === 'ConfigMap'
      ? objects.configMaps.get(key)?.data?.['ca.crt']
      : (() => {
          const secret = objects.secrets.get(key);
          return secret === undefined ? undefined : decodeSecret(secret)['ca.crt'];
        })();
  const exists = kind === 'ConfigMap' ? objects.configMaps.has(key) : objects.secrets.has(key);
  if (!exists) return { reason: 'InvalidCACertificateRef', message: `${kind} ${key} does not exist` };
  if (text === undefined)
    return { reason: 'InvalidCACertificateRef', message: `${kind} ${key} has no 'ca.crt' key` };
  return text;
}
