import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { hasOpenssl, SecretVolume, selfSigned } from '../helpers/certs.ts';
import { ROOT, startTollgate } from '../helpers/tollgate.ts';
import { startUpstream } from '../helpers/upstream.ts';
import { helmTemplate, type Manifest, validateAll } from './manifests.ts';

/**
 * The chart's optional monitoring (docs/observability.md#grafana-dashboard-and-alerts): a Grafana
 * dashboard ConfigMap and a PrometheusRule, neither by default. The rules run through `promtool
 * check rules` and `promtool test rules` on fixture series that make each alert fire and not fire
 * (test/fixtures/prometheus-rules/); every metric the dashboard and the rules name is one the real
 * process serves at /metrics.
 */

const run = promisify(execFile);
const PROMTOOL = '/usr/bin/promtool';
const FIXTURE = join(ROOT, 'test', 'fixtures', 'prometheus-rules', 'tollgate-alerts.test.yaml');
const ALERTS = [
  'TollgateHigh5xxRatio',
  'TollgateAuthFailureSurge',
  'TollgateRouteNoHealthyServer',
  'TollgateCertificateExpiringSoon',
  'TollgateReloadsFailing',
  'TollgateEventLoopDelay',
];

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tollgate-monitoring-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const isDashboard = (m: Manifest) => m.kind === 'ConfigMap' && m.metadata?.labels?.grafana_dashboard === '1';
const enabled = (extra: string[] = []) =>
  helmTemplate({ set: ['grafanaDashboard.enabled=true', 'prometheusRule.enabled=true', ...extra] });

function ruleOf(manifests: Manifest[]): Manifest {
  const rules = manifests.filter((m) => m.kind === 'PrometheusRule');
  assert.equal(rules.length, 1);
  return rules[0] as Manifest;
}

function dashboardOf(manifests: Manifest[]): { manifest: Manifest; json: Manifest } {
  const found = manifests.filter(isDashboard);
  assert.equal(found.length, 1);
  const manifest = found[0] as Manifest;
  return { manifest, json: JSON.parse(manifest.data['tollgate.json']) };
}

/** promtool's exit status and output, without throwing. */
async function promtool(args: string[], cwd: string): Promise<{ ok: boolean; output: string }> {
  try {
    const { stdout, stderr } = await run(PROMTOOL, args, { cwd, timeout: 60_000 });
    return { ok: true, output: stdout + stderr };
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string };
    return { ok: false, output: `${e.stdout ?? ''}${e.stderr ?? e.message}` };
  }
}

/**
 * The rendered rule groups as a Prometheus rule file in a fresh directory, with the fixture beside
 * it. For `test rules` the annotations are left out: they are prose (checked by `check rules`), and
 * the fixture states what fires, with which labels.
 */
async function ruleFiles(rule: Manifest, name: string, withAnnotations: boolean): Promise<string> {
  const where = join(dir, name);
  await mkdir(where, { recursive: true });
  const groups = (rule.spec.groups as Manifest[]).map((group) => ({
    ...group,
    rules: (group.rules as Manifest[]).map(({ annotations, ...rest }) =>
      withAnnotations ? { ...rest, annotations } : rest,
    ),
  }));
  await writeFile(join(where, 'rules.yaml'), stringify({ groups }));
  await copyFile(FIXTURE, join(where, 'tollgate-alerts.test.yaml'));
  return where;
}

/** Every metric family a PromQL text names (ours and prom-client's process metrics). */
function metricNames(text: string): Set<string> {
  return new Set([...text.matchAll(/\b((?:tollgate|process|nodejs)_[a-z0-9_]+)/g)].map((m) => String(m[1])));
}

describe('the chart renders no monitoring objects by default', () => {
  test('neither the dashboard ConfigMap nor the PrometheusRule', async () => {
    const manifests = await helmTemplate();
    assert.deepEqual(
      manifests.filter((m) => isDashboard(m) || m.kind === 'PrometheusRule').map((m) => m.kind),
      [],
    );
  });
});

describe('grafanaDashboard and prometheusRule enabled', () => {
  test('render a dashboard ConfigMap for the Grafana sidecar and a PrometheusRule with every alert', async () => {
    const manifests = await enabled(['grafanaDashboard.annotations.grafana_folder=Edge']);
    await validateAll(manifests);
    const { manifest, json } = dashboardOf(manifests);
    assert.equal(manifest.metadata.namespace, 'edge');
    assert.equal(manifest.metadata.annotations.grafana_folder, 'Edge');
    assert.equal(json.uid, 'tollgate');
    const panels = (json.panels as Manifest[]).filter((panel) => panel.type !== 'row');
    assert.ok(panels.length >= 10, `${panels.length} panels`);
    for (const panel of panels) {
      assert.ok(panel.targets.length > 0, `panel "${panel.title}" has queries`);
      assert.equal(
        panel.datasource.uid,
        // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, not a template
        '${datasource}',
        `panel "${panel.title}" uses the datasource variable`,
      );
    }

    const rule = ruleOf(manifests);
    assert.equal(rule.apiVersion, 'monitoring.coreos.com/v1');
    assert.equal(rule.metadata.namespace, 'edge');
    const names = (rule.spec.groups as Manifest[]).flatMap((group) =>
      (group.rules as Manifest[]).map((r) => r.alert),
    );
    assert.deepEqual(names, ALERTS);
  });

  test('the dashboard can be put in another namespace, and rules get extra labels', async () => {
    const manifests = await enabled([
      'grafanaDashboard.namespace=monitoring',
      'prometheusRule.labels.release=kps',
    ]);
    assert.equal(dashboardOf(manifests).manifest.metadata.namespace, 'monitoring');
    assert.equal(ruleOf(manifests).metadata.labels.release, 'kps');
  });
});

// Skipped on a developer machine without it; CI (.ci/run installs it) runs them, and fails without it.
const promtoolSkip =
  existsSync(PROMTOOL) || process.env.CI ? false : 'promtool is not installed (.ci/run installs it)';

describe('promtool', { skip: promtoolSkip }, () => {
  test('check rules accepts the rendered groups, annotations included', async () => {
    const where = await ruleFiles(ruleOf(await enabled()), 'check', true);
    const result = await promtool(['check', 'rules', 'rules.yaml'], where);
    assert.ok(result.ok, result.output);
    assert.match(result.output, /SUCCESS: 6 rules found/);
  });

  test('test rules: each alert fires on the fixture series that should fire it, and no other', async () => {
    const where = await ruleFiles(ruleOf(await enabled()), 'default', false);
    const result = await promtool(['test', 'rules', 'tollgate-alerts.test.yaml'], where);
    assert.ok(result.ok, result.output);
  });

  test('the fixture notices a threshold change (the thresholds values are used)', async () => {
    // A values file: --set would pass 0.5 as a string.
    const values = join(dir, 'thresholds.yaml');
    await writeFile(
      values,
      stringify({ prometheusRule: { thresholds: { errorRatio5xx: 0.5, certificateExpiryDays: 7 } } }),
    );
    const rule = ruleOf(await helmTemplate({ valuesFiles: [values], set: ['prometheusRule.enabled=true'] }));
    const where = await ruleFiles(rule, 'thresholds', false);
    const result = await promtool(['test', 'rules', 'tollgate-alerts.test.yaml'], where);
    assert.equal(result.ok, false);
    assert.match(result.output, /TollgateHigh5xxRatio/);
    assert.match(result.output, /TollgateCertificateExpiringSoon/);
  });
});

describe('the dashboard and the alerts use only metrics Tollgate serves', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  test('every metric they name is in the /metrics of a real process (TLS listener, workers: 2)', async () => {
    const manifests = await enabled();
    const { json } = dashboardOf(manifests);
    const queries = (json.panels as Manifest[])
      .flatMap((panel) => (panel.targets ?? []) as Manifest[])
      .map((target) => String(target.expr));
    const rules = (ruleOf(manifests).spec.groups as Manifest[]).flatMap((group) =>
      (group.rules as Manifest[]).map((r) => String(r.expr)),
    );
    const used = metricNames([...queries, ...rules].join('\n'));
    assert.ok(used.size >= 15, `${used.size} metrics used`);

    const certificate = selfSigned('status.example.test');
    const volume = new SecretVolume({ 'tls.crt': certificate.cert, 'tls.key': certificate.key });
    const upstream = await startUpstream();
    const tollgate = await startTollgate({
      main: {
        workers: 2,
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: volume.path('tls.crt'),
        tls_key_file: volume.path('tls.key'),
      },
      upstreams: { upstreams: { 'app.test': { paths: { '/': { servers: [upstream.address] } } } } },
    });
    try {
      const text = await tollgate.metrics();
      // A family is served when /metrics declares it; a histogram's series carry suffixes.
      const served = new Set<string>();
      for (const match of text.matchAll(/^# TYPE ([a-z0-9_]+) (\w+)$/gm)) {
        const [name, type] = [String(match[1]), String(match[2])];
        served.add(name);
        if (type === 'histogram')
          for (const suffix of ['_bucket', '_sum', '_count']) served.add(name + suffix);
      }
      const missing = [...used].filter((name) => !served.has(name));
      assert.deepEqual(
        missing,
        [],
        'metrics named by the dashboard or the rules that /metrics does not serve',
      );
      assert.match(text, /^tollgate_tls_certificate_expiry_timestamp_seconds\{[^}]*\} \d+$/m);
    } finally {
      await tollgate.stop();
      await upstream.close();
      volume.remove();
    }
  });
});
