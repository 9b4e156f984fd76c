import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseMainConfig } from '../../src/config/load.ts';
import { cgroupCpuLimit, cpusFromCfs, cpusFromCpuMax, resolveWorkerCount } from '../../src/workers/count.ts';
import { problems, valid } from '../fixtures/config/problems.ts';

const CGROUPS = join(import.meta.dirname, '../fixtures/cgroup');
const parse = (text: string) => parseMainConfig(text, '/etc/tollgate/main.yaml');

describe('workers: CPU quota from the cgroup', () => {
  it('reads cgroup v2 cpu.max, rounding a fractional limit up', () => {
    assert.equal(cpusFromCpuMax('300000 100000\n'), 3);
    assert.equal(cpusFromCpuMax('150000 100000'), 2);
    assert.equal(cpusFromCpuMax('50000 100000'), 1);
    assert.equal(cpusFromCpuMax('max 100000'), null);
    assert.equal(cpusFromCpuMax(''), null);
    assert.equal(cpusFromCpuMax('garbage'), null);
  });

  it('reads cgroup v1 cfs quota and period; -1 is no limit', () => {
    assert.equal(cpusFromCfs('200000\n', '100000\n'), 2);
    assert.equal(cpusFromCfs('-1', '100000'), null);
    assert.equal(cpusFromCfs('100000', '0'), null);
  });

  it('prefers v2, falls back to v1 (cpu,cpuacct or cpu), else reports no limit', () => {
    assert.equal(cgroupCpuLimit(join(CGROUPS, 'v2-limited')), 3);
    assert.equal(cgroupCpuLimit(join(CGROUPS, 'v2-fraction')), 2);
    assert.equal(cgroupCpuLimit(join(CGROUPS, 'v2-unlimited')), null);
    assert.equal(cgroupCpuLimit(join(CGROUPS, 'v1-limited')), 2);
    assert.equal(cgroupCpuLimit(join(CGROUPS, 'v1-unlimited')), null);
    assert.equal(cgroupCpuLimit(join(CGROUPS, 'none')), null);
  });

  it('auto: the quota when set, never more than the CPUs available, else the available parallelism', () => {
    const eight = () => 8;
    assert.equal(
      resolveWorkerCount('auto', { cgroupRoot: join(CGROUPS, 'v2-limited'), parallelism: eight }),
      3,
    );
    assert.equal(
      resolveWorkerCount('auto', { cgroupRoot: join(CGROUPS, 'v1-limited'), parallelism: eight }),
      2,
    );
    assert.equal(
      resolveWorkerCount('auto', { cgroupRoot: join(CGROUPS, 'v2-unlimited'), parallelism: eight }),
      8,
    );
    assert.equal(
      resolveWorkerCount('auto', { cgroupRoot: join(CGROUPS, 'v2-limited'), parallelism: () => 2 }),
      2,
    );
    assert.equal(resolveWorkerCount('auto', { cgroupRoot: join(CGROUPS, 'none'), parallelism: () => 0 }), 1);
  });

  it('a number is taken as it is', () => {
    assert.equal(resolveWorkerCount(4, { cgroupRoot: join(CGROUPS, 'v2-limited') }), 4);
  });
});

describe('main.yaml workers', () => {
  it('defaults to 1: one process, no primary', () => {
    assert.equal(valid(parse('')).workers, 1);
  });

  it('accepts a count or auto', () => {
    assert.equal(valid(parse('workers: 4\n')).workers, 4);
    assert.equal(valid(parse('workers: auto\n')).workers, 'auto');
  });

  it('refuses anything else with file:line:col and the key', () => {
    assert.deepEqual(problems(parse('workers: 0\n')), [
      '/etc/tollgate/main.yaml:1:10: workers: 0 is out of range (must be >= 1 and <= 256)',
    ]);
    assert.deepEqual(problems(parse('workers: 1.5\n')), [
      '/etc/tollgate/main.yaml:1:10: workers: expected an integer, got 1.5',
    ]);
    assert.deepEqual(problems(parse('workers: all\n')), [
      "/etc/tollgate/main.yaml:1:10: workers: expected a number of workers or 'auto', got 'all'",
    ]);
  });
});
