/**
 * nginx in two roles: the fixed-body upstream every target forwards to (a Node upstream would be the
 * bottleneck on a 2-core box), and the reference keep-alive reverse proxy Tollgate is compared with.
 * Each instance runs in the foreground with its own prefix, config, pid file and temp paths in a
 * temp dir, so nothing under /etc/nginx or /var is read or written.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BODY } from './body.ts';
import { makeTempDir, type Started, startProcess } from './processes.ts';

export function nginxBinary(): string | null {
  for (const candidate of ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx']) {
    if (existsSync(candidate)) return candidate;
  }
  return null;
}

/**
 * Settings shared by both roles. `keepalive_requests` is raised because nginx otherwise closes a
 * client connection every 1000 requests and the load generator reconnects, a cost Tollgate (Node's
 * server has no such limit) would not pay. Running as root, nginx would drop its worker to `nobody`;
 * `user root` avoids that (the temp dir is root's) and is ignored with a warning when not root.
 */
function commonConfig(dir: string, workers: number): string {
  return `
${process.getuid?.() === 0 ? 'user root;' : ''}
worker_processes ${workers};
pid ${join(dir, 'nginx.pid')};
error_log stderr warn;
events { worker_connections 4096; }
`;
}

function httpTemps(dir: string): string {
  return ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
    .map((kind) => `  ${kind}_temp_path ${join(dir, kind)};`)
    .join('\n');
}

/** The upstream: answers every path with BODY (text/plain, Content-Length, keep-alive). */
export function upstreamConfig(dir: string, port: number, workers: number): string {
  return `${commonConfig(dir, workers)}
http {
  access_log off;
${httpTemps(dir)}
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:${port} reuseport;
    default_type text/plain;
    location / { return 200 "${BODY}"; }
  }
}
`;
}

/**
 * The reference proxy: a keep-alive pool to the upstream, and the X-Forwarded-* headers Tollgate also
 * sets, so both do the same job per request. One worker by default; with several, each worker gets
 * its own `reuseport` socket, the way Tollgate's workers share the port.
 */
export function proxyConfig(dir: string, port: number, upstreamPort: number, workers = 1): string {
  return `${commonConfig(dir, workers)}
http {
  access_log off;
${httpTemps(dir)}
  keepalive_requests 1000000;
  upstream backend {
    server 127.0.0.1:${upstreamPort};
    keepalive 128;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:${port}${workers > 1 ? ' reuseport' : ''};
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $host;
    }
  }
}
`;
}

/**
 * nginx terminating TLS with HTTP/2 on (and http/1.1 by ALPN), proxying over HTTP/1.1 keep-alive.
 * Debian's nginx 1.22 predates the `http2 on;` directive: `listen … ssl http2` says the same.
 */
export function proxyConfigH2(
  dir: string,
  port: number,
  upstreamPort: number,
  certificate: string,
  key: string,
): string {
  return proxyConfig(dir, port, upstreamPort).replace(
    `listen 127.0.0.1:${port};`,
    `listen 127.0.0.1:${port} ssl http2;\n    ssl_certificate ${certificate};\n    ssl_certificate_key ${key};`,
  );
}

export function startNginx(binary: string, name: string, config: (dir: string) => string): Started {
  const dir = makeTempDir(`tollgate-bench-${name}-`);
  const confPath = join(dir, 'nginx.conf');
  writeFileSync(confPath, config(dir));
  return startProcess(name, binary, ['-p', dir, '-c', confPath, '-e', 'stderr', '-g', 'daemon off;']);
}
