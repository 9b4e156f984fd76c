/**
 * HAProxy and Caddy as peers of nginx: the same keep-alive reverse proxy job (a pool of upstream
 * connections, X-Forwarded-For/-Proto/-Host, no access log), on one core and on N. Each runs in the
 * foreground with its config in a temp dir; nothing under /etc or the user's home is read or written
 * (Caddy's config and data dirs are pointed at the temp dir too).
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeTempDir, type Started, startProcess } from './processes.ts';

function firstExisting(candidates: readonly string[]): string | null {
  return candidates.find((candidate) => existsSync(candidate)) ?? null;
}

export function haproxyBinary(): string | null {
  return firstExisting(['/usr/sbin/haproxy', '/usr/local/sbin/haproxy', '/usr/bin/haproxy']);
}

export function caddyBinary(): string | null {
  return firstExisting(['/usr/bin/caddy', '/usr/local/bin/caddy']);
}

/**
 * HAProxy with `threads` threads (one process). `http-reuse always` keeps the upstream connections
 * shared between client connections, like nginx's `keepalive` pool; `option forwardfor` and the two
 * set-header lines give the upstream the same X-Forwarded-* headers the other proxies send.
 */
export function startHaproxy(
  binary: string,
  name: string,
  port: number,
  upstreamPort: number,
  threads: number,
): Started {
  const dir = makeTempDir(`tollgate-bench-${name}-`);
  const config = join(dir, 'haproxy.cfg');
  writeFileSync(
    config,
    `global
  nbthread ${threads}
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  timeout http-keep-alive 60s
frontend bench
  bind 127.0.0.1:${port}
  default_backend upstream
backend upstream
  http-reuse always
  option forwardfor
  http-request set-header X-Forwarded-Proto http
  http-request set-header X-Forwarded-Host %[req.hdr(host)]
  server up 127.0.0.1:${upstreamPort} maxconn 128
`,
  );
  // -db: foreground, no daemon; -W is not needed with one process.
  return startProcess(name, binary, ['-db', '-f', config]);
}

/**
 * Caddy's `reverse_proxy` with GOMAXPROCS = `cores`. Admin endpoint and automatic HTTPS off (the
 * config Caddy autosaves lands in the temp dir); Caddy adds X-Forwarded-For/-Proto/-Host by itself
 * and keeps up to 128 idle upstream connections alive, like the other proxies' pools.
 */
export function startCaddy(
  binary: string,
  name: string,
  port: number,
  upstreamPort: number,
  cores: number,
): Started {
  const dir = makeTempDir(`tollgate-bench-${name}-`);
  const config = join(dir, 'Caddyfile');
  writeFileSync(
    config,
    `{
  admin off
  auto_https off
}
http://:${port} {
  bind 127.0.0.1
  reverse_proxy 127.0.0.1:${upstreamPort} {
    transport http {
      keepalive 60s
      keepalive_idle_conns 128
    }
  }
}
`,
  );
  return startProcess(name, binary, ['run', '--config', config, '--adapter', 'caddyfile'], {
    ...process.env,
    GOMAXPROCS: String(cores),
    HOME: dir,
    XDG_CONFIG_HOME: dir,
    XDG_DATA_HOME: dir,
  });
}
