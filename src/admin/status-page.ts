import type { RouteStatus, StatusModel } from '../observe/status.ts';

/**
 * /status as HTML (docs/observability.md#status): plain tables that read well in any browser with
 * JavaScript off, one small inline stylesheet, every value escaped. Everything shown comes from the
 * status model, which holds no credential to begin with.
 */
export function renderStatusPage(model: StatusModel): string {
  const sections = [
    summary(model),
    routes(model),
    providers(model),
    sources(model),
    certificates(model),
    model.workers === null ? '' : workers(model.workers),
  ];
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tollgate status</title>
<style>${STYLE}</style>
</head>
<body>
<h1>Tollgate status</h1>
${sections.join('\n')}
<p class="muted">Generated ${text(model.generated_at)}. The same data as JSON: <a href="/status.json">/status.json</a>; counters since each process started, as in <a href="/metrics">/metrics</a>.</p>
</body>
</html>
`;
}

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1b1f23;background:#fff}
h1{font-size:1.5em;margin:0 0 .5em}h2{font-size:1.15em;margin:1.5em 0 .4em}
table{border-collapse:collapse;width:100%;margin:.3em 0}
th,td{border:1px solid #d0d7de;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
code{font:12px ui-monospace,monospace}
.ok{color:#116329}.warning{color:#9a6700;font-weight:600}.down,.failure{color:#cf222e;font-weight:600}
.muted{color:#57606a}.note{background:#fff8c5;border:1px solid #d4a72c;padding:.4em .6em}
dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dt{font-weight:600}dd{margin:0}
`;

function summary(model: StatusModel): string {
  const { totals } = model;
  return `<section>
<h2>Summary</h2>
<dl>
<dt>Phase</dt><dd>${text(model.phase)}</dd>
<dt>Config identity</dt><dd><code>${text(model.config_hash)}</code></dd>
<dt>Routes</dt><dd>${totals.routes} (<span class="${totals.routes_down > 0 ? 'down' : 'ok'}">${totals.routes_down} down</span>, <span class="${totals.routes_warning > 0 ? 'warning' : 'ok'}">${totals.routes_warning} warning</span>)</dd>
<dt>Servers</dt><dd>${totals.servers}</dd>
<dt>Requests</dt><dd>${totals.requests} (${totals.responses_5xx} answered 5xx)</dd>
</dl>
</section>`;
}

function routes(model: StatusModel): string {
  const note = model.routes_truncated
    ? `<p class="note">Showing ${model.routes_truncated.shown} of ${model.routes_truncated.total} routes: those needing attention first. Every route's numbers are in /metrics.</p>`
    : '';
  const rows = model.routes.map(routeRow).join('\n');
  return `<section>
<h2>Routes</h2>
${note}
<table>
<thead><tr><th>State</th><th>Host</th><th>Path</th><th>Auth</th><th class="n">Requests</th><th class="n">5xx</th><th>Servers (health, requests, errors, in flight)</th></tr></thead>
<tbody>
${rows || '<tr><td colspan="7">No routes.</td></tr>'}
</tbody>
</table>
<p class="muted">A server's requests and in-flight count every route it serves; its health and errors are this route's.</p>
</section>`;
}

function routeRow(route: RouteStatus): string {
  const auth =
    route.credentials === null ? text(route.auth) : `${text(route.auth)} (${route.credentials} configured)`;
  const path = `${text(route.path)}${route.exact ? ' <span class="muted">(exact)</span>' : ''}`;
  const servers =
    route.redirect_to !== null
      ? `redirects to ${text(route.redirect_to)}`
      : route.servers.length === 0
        ? `<span class="down">none</span>${route.service ? ` <span class="muted">(${text(route.service)})</span>` : ''}`
        : `<table>${route.servers
            .map(
              (server) =>
                `<tr><td><code>${text(server.address)}</code></td><td class="${server.up ? 'ok' : 'down'}">${server.up ? 'up' : 'down'}</td><td class="n">${server.requests}</td><td class="n">${server.errors}</td><td class="n">${server.in_flight}</td></tr>`,
            )
            .join('')}</table>`;
  const problems =
    route.problems.length > 0 ? `<br><span class="muted">${text(route.problems.join('; '))}</span>` : '';
  return `<tr><td class="${route.state}">${route.state}${problems}</td><td>${text(route.host)}</td><td><code>${path}</code></td><td>${auth}</td><td class="n">${route.requests}</td><td class="n">${route.responses_5xx}</td><td>${servers}</td></tr>`;
}

function sources(model: StatusModel): string {
  const rows = model.sources
    .map((source) => {
      const problems =
        source.problems.length > 0
          ? `<ul>${source.problems.map((problem) => `<li><code>${text(problem)}</code></li>`).join('')}</ul>`
          : '';
      return `<tr><td>${text(source.source)}${source.origin ? `<br><span class="muted">${text(source.origin)}</span>` : ''}</td><td class="${RESULT_CLASS[source.result]}">${text(source.result.replace('_', ' '))}</td><td>${text(source.last_attempt)}</td><td>${text(source.last_success ?? 'never')}</td><td><code>${text(source.hash ?? '')}</code></td><td>${problems}</td></tr>`;
    })
    .join('\n');
  const kube = model.kubernetes;
  const kubernetes =
    kube === null
      ? ''
      : `<h3>Kubernetes</h3>
<table>
<thead><tr><th>Watch</th><th>Connected</th><th>Current up to</th></tr></thead>
<tbody>
${kube.watches.map((watch) => `<tr><td>${text(watch.resource)}</td><td class="${watch.up ? 'ok' : 'down'}">${watch.up ? 'yes' : 'retrying'}</td><td>${text(watch.last_sync ?? 'not yet')}</td></tr>`).join('\n')}
</tbody>
</table>
<p>Ingresses not served as written: ${
          kube.ingresses_rejected.length === 0
            ? 'none.'
            : `<span class="warning">${kube.ingresses_rejected.map((item) => text(`${item.namespace}/${item.name}`)).join(', ')}</span> (their Events say why).`
        }</p>`;
  return `<section>
<h2>Sources and reloads</h2>
<table>
<thead><tr><th>Source</th><th>Last result</th><th>Last attempt</th><th>Last success</th><th>Config identity</th><th>Why not live</th></tr></thead>
<tbody>
${rows || '<tr><td colspan="6">Nothing watched.</td></tr>'}
</tbody>
</table>
${kubernetes}
</section>`;
}

/** OpenID providers: whether their last discovery worked, and if not why (their routes answer 503 when down). */
function providers(model: StatusModel): string {
  if (model.providers.length === 0) return '';
  const rows = model.providers
    .map(
      (provider) =>
        `<tr><td>${text(provider.name)}</td><td class="${provider.state === 'failing' ? 'warning' : provider.state}">${provider.state === 'ok' ? 'discovery ok' : provider.state === 'failing' ? 'discovery failing (earlier metadata in use)' : 'down: its routes answer 503'}</td><td>${text(provider.problem ?? '')}</td></tr>`,
    )
    .join('\n');
  return `<section>
<h2>Login providers</h2>
<table>
<thead><tr><th>Provider</th><th>State</th><th>Problem</th></tr></thead>
<tbody>
${rows}
</tbody>
</table>
</section>`;
}

const RESULT_CLASS: Record<StatusModel['sources'][number]['result'], string> = {
  loaded: 'ok',
  success: 'ok',
  failure: 'failure',
  restart_required: 'warning',
};

function certificates(model: StatusModel): string {
  if (model.certificates.length === 0) return '';
  const rows = model.certificates
    .map(
      (cert) =>
        `<tr><td>${text(cert.certificate)}</td><td>${text(cert.names.join(', '))}</td><td>${text(cert.expires_at)}</td><td class="${cert.warning ? 'warning' : 'ok'}">${cert.days_left} ${cert.days_left === 1 ? 'day' : 'days'}${cert.warning ? ' — renew soon' : ''}</td></tr>`,
    )
    .join('\n');
  return `<section>
<h2>TLS certificates</h2>
<table>
<thead><tr><th>Certificate</th><th>Names</th><th>Expires</th><th>Left</th></tr></thead>
<tbody>
${rows}
</tbody>
</table>
</section>`;
}

function workers(status: NonNullable<StatusModel['workers']>): string {
  const restarts = Object.entries(status.restarts)
    .map(([reason, count]) => `${text(reason)}: ${count}`)
    .join(', ');
  const rows = status.list
    .map(
      (worker) =>
        `<tr><td>${worker.index}</td><td>${worker.pid ?? ''}</td><td class="${worker.state === 'serving' ? 'ok' : 'warning'}">${text(worker.state)}</td><td>${worker.serves_live_config ? 'yes' : 'no'}</td></tr>`,
    )
    .join('\n');
  return `<section>
<h2>Workers</h2>
<p>${status.serving} of ${status.configured} serving the live config. Restarts: ${restarts || 'none'}.</p>
<table>
<thead><tr><th>Worker</th><th>PID</th><th>State</th><th>Live config</th></tr></thead>
<tbody>
${rows}
</tbody>
</table>
</section>`;
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Every value from the model goes through here (host names, paths and messages come from config). */
export function text(value: string | number): string {
  return String(value).replace(/[&<>"']/g, (char) => ESCAPES[char] as string);
}
