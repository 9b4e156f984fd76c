/**
 * A path's `service:` reference: `<name>[.<namespace>]:<port number or port name>`.
 * Parsed offline (validate never contacts the API), see docs/kubernetes.md.
 */
export interface ServiceRef {
  /** The Service's name (a DNS-1035 label). */
  readonly name: string;
  /** The namespace as written, or null for "the provider's namespace". */
  readonly namespace: string | null;
  /**
   * A number is matched against the endpoint (target) port in the EndpointSlices; a name against the
   * Service port's name, which the EndpointSlice controller copies onto every slice port.
   */
  readonly port: number | string;
}

/** A Service reference with its namespace decided: what one EndpointSlice watch serves. */
export interface ResolvedServiceRef extends ServiceRef {
  readonly namespace: string;
}

// Service names are DNS-1035 labels; namespaces DNS-1123 labels; port names IANA service names.
const DNS_1035_LABEL = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const PORT_NAME = /^[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?$/;

/** Parses a `service:` value, or explains in one line why it is not one. */
export function parseServiceRef(
  value: string,
): { ok: true; ref: ServiceRef } | { ok: false; message: string } {
  const colon = value.lastIndexOf(':');
  if (colon < 0) {
    return {
      ok: false,
      message: `'${value}' has no port: write "<service>[.<namespace>]:<port or port name>"`,
    };
  }
  const target = value.slice(0, colon);
  const portText = value.slice(colon + 1);
  const dot = target.indexOf('.');
  const name = dot < 0 ? target : target.slice(0, dot);
  const namespace = dot < 0 ? null : target.slice(dot + 1);
  if (!DNS_1035_LABEL.test(name)) {
    return {
      ok: false,
      message: `'${name}' is not a Service name (lower-case letters, digits and '-', starting with a letter, at most 63)`,
    };
  }
  if (namespace !== null && !DNS_1123_LABEL.test(namespace)) {
    return {
      ok: false,
      message: `'${namespace}' is not a namespace name (lower-case letters, digits and '-', at most 63; no further dots)`,
    };
  }
  let port: number | string;
  if (/^[0-9]+$/.test(portText)) {
    port = Number(portText);
    if (port < 1 || port > 65535) return { ok: false, message: `port ${portText} is out of range 1-65535` };
  } else if (PORT_NAME.test(portText) && /[a-z]/.test(portText) && !portText.includes('--')) {
    port = portText;
  } else {
    return {
      ok: false,
      message: `'${portText}' is neither a port number nor a port name (lower-case letters, digits and '-', at most 15)`,
    };
  }
  return { ok: true, ref: { name, namespace, port } };
}

export function resolveServiceRef(ref: ServiceRef, defaultNamespace: string): ResolvedServiceRef {
  return { name: ref.name, namespace: ref.namespace ?? defaultNamespace, port: ref.port };
}

/** `name.namespace:port`: the key endpoint snapshots are indexed by, and how logs name a reference. */
export function serviceRefKey(ref: ResolvedServiceRef): string {
  return `${ref.name}.${ref.namespace}:${ref.port}`;
}

/** The reference as written in upstreams.yaml (logs, error messages). */
export function serviceRefText(ref: ServiceRef): string {
  return `${ref.name}${ref.namespace === null ? '' : `.${ref.namespace}`}:${ref.port}`;
}
