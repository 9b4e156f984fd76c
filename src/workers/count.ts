import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';

import { MAX_WORKERS, type WorkersSetting } from '../config/types.ts';

export { MAX_WORKERS, type WorkersSetting };

/**
 * CPUs allowed by a cgroup v2 `cpu.max` ("<quota> <period>" in µs, quota `max` = unlimited), rounded
 * up: a 1.5-CPU limit gets 2 workers, as nginx's and Go's automatic settings do. null when unlimited
 * or unreadable.
 */
export function cpusFromCpuMax(text: string): number | null {
  const [quota, period = '100000'] = text.trim().split(/\s+/);
  if (quota === undefined || quota === 'max') return null;
  return cpusFromQuota(Number(quota), Number(period));
}

/** cgroup v1: `cpu.cfs_quota_us` (-1 = unlimited) over `cpu.cfs_period_us`. */
export function cpusFromCfs(quotaText: string, periodText: string): number | null {
  return cpusFromQuota(Number(quotaText.trim()), Number(periodText.trim()));
}

function cpusFromQuota(quota: number, period: number): number | null {
  if (!Number.isFinite(quota) || !Number.isFinite(period) || quota <= 0 || period <= 0) return null;
  return Math.max(1, Math.ceil(quota / period));
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

/**
 * The container's CPU quota, read from the cgroup filesystem mounted at `root`: v2's `cpu.max`
 * first, then v1's `cpu,cpuacct` or `cpu` controller. null when there is no quota (the pod has no
 * CPU limit, or this is not a container).
 */
export function cgroupCpuLimit(root = '/sys/fs/cgroup'): number | null {
  const cpuMax = readText(join(root, 'cpu.max'));
  if (cpuMax !== null) return cpusFromCpuMax(cpuMax);
  for (const controller of ['cpu,cpuacct', 'cpu']) {
    const quota = readText(join(root, controller, 'cpu.cfs_quota_us'));
    const period = readText(join(root, controller, 'cpu.cfs_period_us'));
    if (quota !== null && period !== null) return cpusFromCfs(quota, period);
  }
  return null;
}

export interface WorkerCountSources {
  cgroupRoot?: string;
  /** CPUs the process may run on (affinity included); os.availableParallelism() by default. */
  parallelism?: () => number;
}

/**
 * How many worker processes to run. `auto` is the CPU quota when one is set (never more than the
 * CPUs actually available), else the available parallelism: a process per CPU the pod may use, as
 * nginx's `worker_processes auto` does.
 */
export function resolveWorkerCount(setting: WorkersSetting, sources: WorkerCountSources = {}): number {
  if (setting !== 'auto') return setting;
  const available = Math.max(1, (sources.parallelism ?? availableParallelism)());
  const quota = cgroupCpuLimit(sources.cgroupRoot);
  return Math.min(MAX_WORKERS, quota === null ? available : Math.min(quota, available));
}
