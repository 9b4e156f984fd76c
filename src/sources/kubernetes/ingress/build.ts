import { X509Certificate } from 'node:crypto';
import type { V1Ingress, V1IngressBackend, V1Service } from '@kubernetes/client-node';
import { pathConfig } from '../../../config/path-config.ts';
import type { ServiceRef } from '../../../config/service-ref.ts';
import type { PathConfig, StickySessions } from '../../../config/types.ts';
import { DEFAULT_HOST, normalisePrefix } from '../../../routing/normalise.ts';
import { certificateNames } from '../../certificate-store.ts';
import { certificateHosts } from '../ownership.ts';
import { tlsPair } from '../secret-data.ts';
import { type IngressSettings, readAnnotations } from './annotations.ts';
import { authorizationOf } from './auth-annotations.ts';
import { backendPoliciesOf } from './backend.ts';
import type { ClientCheckPem } from './certificates.ts';
import { claimKey, hostKey } from './claims.ts';
import { clientCertificatesOf } from './client-certificate-annotations.ts';
import { withAllowAnnotations } from './oidc-annotations.ts';
import { closingPolicyProblems, policiesOf } from './policy-annotations.ts';
import type { IngressNotice, IngressReport } from './reports.ts';
import type { BuildInput } from './translation-cache.ts';

/**
 * One Ingress on its own (docs/ingress.md#rules): its paths in upstreams.yaml's terms, its TLS
 * certificates and what it is told, before any other Ingress is looked at. What it reads of the
 * translation's input goes through BuildInput, so that the cache can reuse it (translation-cache.ts).
 */

/** A TLS certificate an Ingress asks to serve for its hosts by SNI. */
export interface IngressCertificate {
  /** `namespace/name` of the Secret. */
  secret: string;
  /**
   * The names it is served for: of the hosts of its `spec.tls` entry (else the certificate's own
   * names), those its Ingress serves paths on (docs/ingress.md#tls).
   */
  hosts: string[];
  /** `hosts` came from `spec.tls[].hosts` (else from the certificate). */
  listed: boolean;
  /** PEM, checked: the certificate parses and the key is its key. */
  certificate: string;
  key: string;
  /** The Ingress's auth-tls-* check for these hosts (docs/ingress.md#client-certificates). */
  clientCertificates?: ClientCheckPem;
}

/** What one Ingress's build says of it, apart from its report so that a build can be reused. */
export interface Told {
  namespace: string;
  name: string;
  problems: string[];
  warnings: string[];
  notices: IngressNotice[];
}

/** One Ingress's build and what it told: what the cache keeps per Ingress. */
export interface BuildOutcome {
  built: BuiltIngress | null;
  told: Told;
}

export function builtOf(ingress: V1Ingress, input: BuildInput): BuildOutcome {
  const told: Told = {
    namespace: ingress.metadata?.namespace ?? 'default',
    name: ingress.metadata?.name ?? '',
    problems: [],
    warnings: [],
    notices: [],
  };
  return { built: buildIngress(ingress, input, told), told };
}

/** Copies what a build told into this translation's report (later steps add to the report). */
export function tell(report: IngressReport, told: Told): void {
  if (told.problems.length > 0) report.problems.push(...told.problems);
  if (told.warnings.length > 0) report.warnings.push(...told.warnings);
  if (told.notices.length > 0) report.notices.push(...told.notices);
}

/**
 * An Ingress's certificates narrowed to the hosts it serves paths on (and so owns): a Secret never
 * claims SNI for another's host (docs/ingress.md#tls). A listed host left out is reported.
 */
export function ownCertificates(
  certificates: readonly IngressCertificate[],
  servedHosts: ReadonlySet<string>,
  report: IngressReport,
): IngressCertificate[] {
  const kept: IngressCertificate[] = [];
  for (const certificate of certificates) {
    const served = certificateHosts(certificate.hosts, servedHosts);
    if (certificate.listed)
      for (const host of certificate.hosts.filter((listed) => !served.includes(listed)))
        report.notices.push({
          reason: 'TLSHostNotServed',
          message: `spec.tls: ${certificate.secret} is not served for ${host}: this Ingress serves no path there`,
        });
    if (served.length > 0) kept.push({ ...certificate, hosts: served });
  }
  return kept;
}

export interface BuiltIngress {
  paths: Array<[host: string, path: PathConfig]>;
  /** Each path's key in the conflict rules (claimKey), by index. */
  keys: string[];
  certificates: IngressCertificate[];
}

/**
 * One Ingress's paths, or null (after reporting why) when it cannot be served at all. It reads the
 * translation's input only through `input` (BuildInput: what the cache records), and writes nothing
 * but what it returns and `report`.
 */
function buildIngress(ingress: V1Ingress, input: BuildInput, report: Told): BuiltIngress | null {
  const namespace = report.namespace;
  const origin = `ingress/${namespace}/${report.name}`;
  const annotations = readAnnotations(ingress.metadata?.annotations);
  report.warnings.push(...annotations.warnings);
  const problems = [...annotations.problems];
  const settings = annotations.settings;

  // TLS: the Secrets must exist and be usable; their hosts redirect plain HTTP unless told not to.
  const certificates: IngressCertificate[] = [];
  const tlsHosts = new Set<string>();
  for (const [index, tls] of (ingress.spec?.tls ?? []).entries()) {
    const hostsOfEntry: string[] = [];
    for (const host of tls.hosts ?? []) {
      const key = hostKey(host);
      if (key.ok) hostsOfEntry.push(key.value);
      else problems.push(`spec.tls[${index}].hosts: '${host}' ${key.reason}`);
    }
    for (const host of hostsOfEntry) tlsHosts.add(host);
    if (!tls.secretName) {
      problems.push(`spec.tls[${index}] names no secretName (a default certificate is not offered)`);
      continue;
    }
    const secret = input.secrets.get(`${namespace}/${tls.secretName}`);
    const pair = secret === undefined ? null : tlsPair(secret);
    if (secret === undefined) problems.push(`TLS Secret ${namespace}/${tls.secretName} does not exist`);
    else if (typeof pair === 'string') problems.push(`TLS Secret ${namespace}/${tls.secretName}: ${pair}`);
    else if (pair !== null) {
      const listed = hostsOfEntry.length > 0;
      const hosts = listed ? hostsOfEntry : certificateNames(new X509Certificate(pair.certificate));
      certificates.push({ secret: `${namespace}/${tls.secretName}`, hosts, listed, ...pair });
    }
  }

  const auth = authorizationOf(settings, namespace, input);
  report.notices.push(...auth.warnings.map((message) => ({ reason: 'WeakPasswordHash' as const, message })));
  // Upstream protocol and TLS, timeouts, Host, redirects (backend.ts).
  const backendPolicies = backendPoliciesOf(settings, namespace, input.secrets);
  report.warnings.push(...backendPolicies.warnings);
  report.notices.push(...backendPolicies.notices);
  problems.push(...backendPolicies.problems);
  // auth-tls-*: a check on the Ingress's TLS hosts, and what its paths carry of it.
  const clients = clientCertificatesOf(
    settings,
    namespace,
    `${namespace}/${report.name}`,
    input.secrets,
    settings.authType !== undefined,
  );
  report.warnings.push(...clients.warnings);
  const closed = [
    ...annotations.authProblems,
    ...auth.problems,
    ...clients.problems,
    ...closingPolicyProblems(settings),
  ];
  if (clients.check !== null)
    for (const certificate of certificates) certificate.clientCertificates = clients.check;

  // The allow-* annotations narrow the policy (sources/kubernetes/ingress/oidc-annotations.ts).
  const allowed = withAllowAnnotations(clients.policy ?? auth.policy, settings);
  if (allowed.problem !== undefined) closed.push(allowed.problem);
  // auth-tls-match-cn's rule joins them (withAllowAnnotations writes the allow-* rules alone).
  const commonNames = clients.policy?.allow?.commonNames ?? null;
  if (commonNames !== null && allowed.policy !== null)
    allowed.policy = {
      ...allowed.policy,
      allow: {
        ...(allowed.policy.allow ?? {
          subjects: null,
          emails: null,
          emailDomains: null,
          groups: null,
          claims: null,
        }),
        commonNames,
      },
    };

  const paths: Array<[string, PathConfig]> = [];
  const missingBackends: string[] = [];
  const pathOf = (host: string, path: string, exact: boolean, backend: V1IngressBackend, where: string) => {
    // Request policies (docs/ingress.md#request-policies); a regex path is routed by its literal start.
    const policy = policiesOf(settings, path);
    if (!policy.ok) {
      for (const problem of policy.problems) if (!problems.includes(problem)) problems.push(problem);
      return;
    }
    const prefix = exact ? exactPath(policy.routeKey) : normalisePrefix(policy.routeKey);
    if (!prefix.ok) {
      problems.push(`${where}.path '${path}' ${prefix.reason}`);
      return;
    }
    const servers = backendOf(backend, namespace, input.services, where, problems, missingBackends);
    if (servers === undefined) return;
    const toHttps =
      settings.forceToHttps === true ||
      (tlsHosts.has(host) && settings.toHttps !== false) ||
      settings.toHttps === true;
    paths.push([
      host,
      pathConfig(prefix.value, {
        service: servers,
        toHttps,
        authorization: allowed.policy,
        rateLimit: settings.rateLimit ?? null,
        exact,
        unavailable: closed.length > 0 ? closed.join('; ') : null,
        stickySessions: stickyOf(settings.sticky),
        origin,
        requestHeaders: settings.requestHeaders ?? null,
        responseHeaders: settings.responseHeaders ?? null,
        // A closed path answers 503 whatever else it says; its policies may not even compile.
        ...(policy.policies && closed.length === 0 ? { policies: policy.policies } : {}),
        ...backendPolicies.path,
      }),
    ]);
  };

  for (const [ruleIndex, rule] of (ingress.spec?.rules ?? []).entries()) {
    const where = `spec.rules[${ruleIndex}]`;
    const key =
      rule.host === undefined || rule.host === ''
        ? ({ ok: true, value: DEFAULT_HOST } as const)
        : hostKey(rule.host);
    if (!key.ok) {
      problems.push(`${where}.host '${rule.host}' ${key.reason}`);
      continue;
    }
    const rulePaths = rule.http?.paths ?? [];
    for (const [pathIndex, item] of rulePaths.entries()) {
      const at = `${where}.http.paths[${pathIndex}]`;
      const type = item.pathType;
      if (type !== 'Prefix' && type !== 'Exact' && type !== 'ImplementationSpecific') {
        problems.push(`${at}.pathType '${type}' is not Prefix, Exact or ImplementationSpecific`);
        continue;
      }
      // ImplementationSpecific is read as Prefix; it alone may leave the path out (= '/').
      const path = item.path ?? (type === 'ImplementationSpecific' ? '/' : undefined);
      if (path === undefined) {
        problems.push(`${at}.path is required for pathType ${type}`);
        continue;
      }
      pathOf(key.value, path, type === 'Exact', item.backend, at);
    }
  }
  const fallback = ingress.spec?.defaultBackend;
  if (fallback) pathOf(DEFAULT_HOST, '/', false, fallback, 'spec.defaultBackend');
  if (paths.length === 0 && problems.length === 0) problems.push('it has no rule and no defaultBackend');

  if (problems.length > 0) {
    report.problems.push(...problems, ...closed);
    return null;
  }
  report.problems.push(...closed);
  report.notices.push(...missingBackends.map((message) => ({ reason: 'BackendNotFound' as const, message })));
  return { paths, keys: paths.map(([host, path]) => claimKey(host, path)), certificates };
}

/** An Exact path: the prefix form, keeping a trailing slash (`/a/` is not `/a`). */
function exactPath(path: string): { ok: true; value: string } | { ok: false; reason: string } {
  const prefix = normalisePrefix(path);
  if (!prefix.ok || prefix.value === '/' || !path.endsWith('/')) return prefix;
  return { ok: true, value: `${prefix.value}/` };
}

/**
 * The Service reference of a backend, mapping the Service's port (as Kubernetes means it) to the
 * name the EndpointSlice controller gives that port on every slice ('' for a Service's only,
 * unnamed port). null: the Service or its port does not exist (yet): the path answers 503
 * `no_ready_endpoints` until it does. undefined: the backend cannot be served (reported).
 */
function backendOf(
  backend: V1IngressBackend,
  namespace: string,
  services: ReadonlyMap<string, V1Service>,
  where: string,
  problems: string[],
  warnings: string[],
): ServiceRef | null | undefined {
  // The field of the backend itself: a path's `backend`, or `spec.defaultBackend`, which is one.
  const field = where === 'spec.defaultBackend' ? where : `${where}.backend`;
  if (backend.resource !== undefined) {
    problems.push(`${field}: resource backends are not supported (name a Service)`);
    return undefined;
  }
  const service = backend.service;
  if (service === undefined || !service.name) {
    problems.push(`${field} names no Service`);
    return undefined;
  }
  const wanted = service.port?.number ?? service.port?.name;
  if (wanted === undefined) {
    problems.push(`${field}.service.port needs a number or a name`);
    return undefined;
  }
  const object = services.get(`${namespace}/${service.name}`);
  if (object === undefined) {
    warnings.push(`Service ${namespace}/${service.name} does not exist: ${where} answers 503`);
    return null;
  }
  if (object.spec?.type === 'ExternalName') {
    problems.push(`${where}: Service ${service.name} is an ExternalName Service, which is not supported`);
    return undefined;
  }
  const port = (object.spec?.ports ?? []).find((candidate) =>
    typeof wanted === 'number' ? candidate.port === wanted : candidate.name === wanted,
  );
  if (port === undefined) {
    warnings.push(`Service ${namespace}/${service.name} has no port ${wanted}: ${where} answers 503`);
    return null;
  }
  return { name: service.name, namespace, port: port.name ?? '' };
}

function stickyOf(sticky: IngressSettings['sticky']): StickySessions | null {
  if (sticky === undefined || sticky === false) return null;
  return { maxAgeSeconds: sticky };
}
