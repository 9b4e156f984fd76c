/**
 * What every pod running Tollgate must get right, whichever way it was rendered (Helm, Kustomize
 * ingress, Kustomize sidecar). One function, so the three renderings are held to the same rules.
 */
import assert from 'node:assert/strict';
import {
  configVolume,
  containerPortNumber,
  type Manifest,
  mountedFile,
  parseYaml,
  tollgateContainer,
} from './manifests.ts';

const portOf = (address: unknown, fallback: number) =>
  typeof address === 'string' ? Number(address.slice(address.lastIndexOf(':') + 1)) : fallback;

export interface PodContractResult {
  main: Manifest;
  /** Name of the ConfigMap or Secret upstreams.yaml is projected from. */
  upstreamsConfigMapName: string;
  upstreamsFrom: 'ConfigMap' | 'Secret';
}

export function assertPodContract(manifests: Manifest[], podSpec: Manifest, what: string): PodContractResult {
  const container = tollgateContainer(podSpec);
  const main = parseYaml(mountedFile(manifests, podSpec, 'main.yaml'));
  const ports = {
    proxy: portOf(main.proxy_address_http, 8080),
    token: portOf(main.config_address, 8081),
    admin: portOf(main.admin_address, 9090),
  };

  // The listeners main.yaml opens are the ports the container declares.
  const declared = (container.ports as Manifest[]).map((p) => p.containerPort);
  for (const [name, port] of Object.entries(ports)) {
    assert.ok(declared.includes(port), `${what}: ${name} port ${port} (main.yaml) is not a container port`);
  }

  // Probes hit the admin listener: liveness on /healthz, readiness (and startup) on /readyz.
  for (const [probe, path] of [
    ['livenessProbe', '/healthz'],
    ['readinessProbe', '/readyz'],
    ['startupProbe', '/readyz'],
  ] as const) {
    const spec = container[probe] as Manifest | undefined;
    assert.ok(spec, `${what}: ${probe} missing`);
    assert.equal(spec.httpGet?.path, path, `${what}: ${probe} path`);
    assert.equal(
      containerPortNumber(container, spec.httpGet.port),
      ports.admin,
      `${what}: ${probe} not on the admin port`,
    );
  }

  // Config: one directory at /etc/tollgate, never a subPath (a subPath mount misses the kubelet's
  // ..data swap, so hot reload would silently stop working).
  for (const mount of container.volumeMounts as Manifest[]) {
    assert.equal(mount.subPath, undefined, `${what}: ${mount.mountPath} is mounted with subPath`);
    assert.equal(mount.subPathExpr, undefined, `${what}: ${mount.mountPath} is mounted with subPathExpr`);
  }
  const volume = configVolume(podSpec);
  const sources = volume.projected?.sources as Manifest[] | undefined;
  assert.ok(
    sources,
    `${what}: /etc/tollgate should be a projected volume (main.yaml, upstreams.yaml, masterkey)`,
  );
  // From a ConfigMap, or from a Secret when it holds credentials: projected the same way either way.
  const upstreamsSource = sources.find((s) => {
    const ref = s.configMap ?? s.secret;
    if (!ref) return false;
    const kind = s.configMap ? 'ConfigMap' : 'Secret';
    return (
      (ref.items as Manifest[] | undefined)?.some((i) => i.path === 'upstreams.yaml') ??
      manifests.some(
        (m) => m.kind === kind && m.metadata.name === ref.name && 'upstreams.yaml' in (m.data ?? {}),
      )
    );
  });
  assert.ok(upstreamsSource, `${what}: upstreams.yaml is not projected into /etc/tollgate`);
  assert.equal(
    main.upstreams_conf ?? 'upstreams.yaml',
    'upstreams.yaml',
    `${what}: upstreams.yaml must sit beside main.yaml`,
  );

  const secretPaths = sources.flatMap((s) =>
    ((s.secret?.items as Manifest[] | undefined) ?? []).map((i) => i.path),
  );
  if (main.masterkey_file !== undefined) {
    assert.ok(
      secretPaths.includes(main.masterkey_file),
      `${what}: masterkey_file ${main.masterkey_file} is not projected from a Secret`,
    );
  }
  // OpenID Connect: the session secrets and every client secret come from Secrets, beside main.yaml.
  const oidcFiles: Array<[string, unknown]> = [['session_secret_file', main.session_secret_file]];
  for (const [name, provider] of Object.entries((main.oidc_providers ?? {}) as Record<string, Manifest>)) {
    oidcFiles.push([`oidc_providers.${name}.client_secret_file`, provider.client_secret_file]);
  }
  for (const [key, path] of oidcFiles) {
    if (path === undefined) continue;
    assert.ok(secretPaths.includes(path), `${what}: ${key} ${path} is not projected from a Secret`);
  }

  // The process command: node is PID 1 through the image's entrypoint; args select the config.
  if (container.command !== undefined) assert.fail(`${what}: command overrides the image entrypoint`);
  assert.deepEqual(container.args, ['start', '--config', '/etc/tollgate/main.yaml'], `${what}: args`);

  // Security: non-root, read-only root, no privilege escalation, no capabilities.
  const podSecurity = (podSpec.securityContext ?? {}) as Manifest;
  const security = (container.securityContext ?? {}) as Manifest;
  assert.ok(podSecurity.runAsNonRoot === true || security.runAsNonRoot === true, `${what}: runAsNonRoot`);
  const uid = security.runAsUser ?? podSecurity.runAsUser;
  if (uid !== undefined) assert.notEqual(uid, 0, `${what}: runAsUser 0`);
  assert.equal(security.readOnlyRootFilesystem, true, `${what}: readOnlyRootFilesystem`);
  assert.equal(security.allowPrivilegeEscalation, false, `${what}: allowPrivilegeEscalation`);
  assert.ok(
    (security.capabilities?.drop as string[] | undefined)?.includes('ALL'),
    `${what}: capabilities drop ALL`,
  );
  assert.notEqual(security.privileged, true, `${what}: privileged`);

  // /tmp is the only writable place, and it is an emptyDir.
  const tmpMount = (container.volumeMounts as Manifest[]).find((m) => m.mountPath === '/tmp');
  assert.ok(tmpMount, `${what}: /tmp not mounted (the root filesystem is read-only)`);
  const tmpVolume = (podSpec.volumes as Manifest[]).find((v) => v.name === tmpMount.name);
  assert.ok(tmpVolume?.emptyDir, `${what}: /tmp should be an emptyDir`);

  // The kubelet must not kill the pod while it drains.
  const delay = (main.shutdown_delay_seconds as number | undefined) ?? 5;
  const grace = (main.shutdown_grace_seconds as number | undefined) ?? 25;
  const period = (podSpec.terminationGracePeriodSeconds as number | undefined) ?? 30;
  assert.ok(
    period >= delay + grace,
    `${what}: terminationGracePeriodSeconds ${period} < shutdown_delay_seconds ${delay} + shutdown_grace_seconds ${grace}`,
  );

  assert.equal(podSpec.automountServiceAccountToken, false, `${what}: Tollgate needs no API token`);
  assert.ok(container.resources?.requests, `${what}: resource requests`);
  assert.ok(container.resources?.limits?.memory, `${what}: memory limit`);

  return {
    main,
    upstreamsConfigMapName: (upstreamsSource.configMap ?? upstreamsSource.secret).name as string,
    upstreamsFrom: upstreamsSource.configMap ? 'ConfigMap' : 'Secret',
  };
}
