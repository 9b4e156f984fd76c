import { randomInt } from 'node:crypto';
import { lstat, mkdir, mkdtemp, readlink, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A directory laid out exactly like a Kubernetes ConfigMap volume, updated the way the kubelet's
 * AtomicWriter (pkg/volume/util/atomic_writer.go) does it:
 *
 *   <dir>/..2026_11_22_04_05_00.123456789/upstreams.yaml   the payload, in a timestamped directory
 *   <dir>/..data -> ..2026_11_22_04_05_00.123456789        the one symlink that is swapped
 *   <dir>/upstreams.yaml -> ..data/upstreams.yaml          the user-visible key, never rewritten
 *
 * An update writes a new timestamped directory, points a `..data_tmp` symlink at it, renames that
 * over `..data` (one atomic rename(2)), creates symlinks for new keys, removes the old timestamped
 * directory and the symlinks of keys that are gone. A reader therefore sees either the old payload or
 * the new one, and a watcher on the file itself keeps following the deleted old directory.
 */
export interface ConfigMapVolume {
  /** The mount directory. */
  readonly dir: string;
  /** `<dir>/<key>`: the path a container reads. */
  path(key: string): string;
  /** Replaces the whole payload atomically, as the kubelet does when the ConfigMap changes. */
  update(files: Readonly<Record<string, string>>): Promise<void>;
  /** The timestamped directory `..data` currently points at. */
  current(): Promise<string>;
  remove(): Promise<void>;
}

const DATA_DIR = '..data';
const DATA_DIR_TMP = '..data_tmp';

/** `..2006_01_02_15_04_05.<random digits>`, like os.MkdirTemp with the kubelet's UTC time pattern. */
function timestampedName(): string {
  const d = new Date();
  const p = (n: number) => String(n).padStart(2, '0');
  const stamp = `${d.getUTCFullYear()}_${p(d.getUTCMonth() + 1)}_${p(d.getUTCDate())}_${p(d.getUTCHours())}_${p(d.getUTCMinutes())}_${p(d.getUTCSeconds())}`;
  return `..${stamp}.${randomInt(1e9)}`;
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch {
    return false;
  }
}

export async function createConfigMapVolume(
  files: Readonly<Record<string, string>>,
  dir?: string,
): Promise<ConfigMapVolume> {
  const root = dir ?? (await mkdtemp(join(tmpdir(), 'tollgate-configmap-')));
  let keys = new Set<string>();

  const update = async (payload: Readonly<Record<string, string>>) => {
    const previous = (await exists(join(root, DATA_DIR))) ? await readlink(join(root, DATA_DIR)) : null;
    let name = timestampedName();
    while (await exists(join(root, name))) name = timestampedName();
    const tsDir = join(root, name);
    await mkdir(tsDir, { mode: 0o755 });
    for (const [key, content] of Object.entries(payload))
      await writeFile(join(tsDir, key), content, { mode: 0o644 });

    const tmpLink = join(root, DATA_DIR_TMP);
    await rm(tmpLink, { force: true });
    await symlink(name, tmpLink);
    await rename(tmpLink, join(root, DATA_DIR));

    const nextKeys = new Set(Object.keys(payload));
    for (const key of nextKeys) {
      if (!(await exists(join(root, key)))) await symlink(join(DATA_DIR, key), join(root, key));
    }
    if (previous !== null) await rm(join(root, previous), { recursive: true, force: true });
    for (const key of keys) if (!nextKeys.has(key)) await rm(join(root, key), { force: true });
    keys = nextKeys;
  };

  await update(files);
  return {
    dir: root,
    path: (key) => join(root, key),
    update,
    current: () => readlink(join(root, DATA_DIR)),
    remove: () => rm(root, { recursive: true, force: true }),
  };
}
