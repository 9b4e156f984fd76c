/**
 * `npm run demo`: starts two tiny demo upstreams on 127.0.0.1:3001 and :3002 and Tollgate with
 * examples/main.yaml, then prints what to curl. Ctrl-C stops everything.
 */
import { spawn } from 'node:child_process';
import http from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

function demoUpstream(port: number): http.Server {
  return http
    .createServer((req, res) => {
      const body = JSON.stringify(
        {
          hello: `from demo upstream on port ${port}`,
          method: req.method,
          url: req.url,
          subject: req.headers['x-tollgate-subject'] ?? null,
          forwarded_for: req.headers['x-forwarded-for'] ?? null,
        },
        null,
        2,
      );
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`${body}\n`);
    })
    .listen(port, '127.0.0.1');
}

const upstreams = [demoUpstream(3001), demoUpstream(3002)];
const tollgate = spawn(
  process.execPath,
  [join(here, '..', 'dist', 'main.js'), 'start', '--config', join(here, 'main.yaml')],
  {
    stdio: 'inherit',
  },
);

process.stderr.write(`
Tollgate demo: proxy on http://localhost:8080, token API on :8081, admin on :9090

  curl -s http://localhost:8080/hello                                   # round robin over two servers
  curl -s -u admin:demo-password http://localhost:8080/admin            # basic auth
  curl -s -H 'x-api-key: demo-api-key' http://localhost:8080/api        # API key
  TOKEN=$(curl -s -H 'content-type: application/json' \\
    -d '{"master_key":"demo-masterkey-change-me","owner":"me","valid":60}' \\
    http://localhost:8081/jwt | sed -E 's/.*"token":"([^"]+)".*/\\1/')
  curl -s -H "authorization: Bearer $TOKEN" http://localhost:8080/private
  curl -s "http://localhost:8080/private?tollgatetoken=$TOKEN"
  curl -s http://localhost:9090/metrics | grep tollgate_

`);

const shutdown = () => {
  tollgate.kill('SIGTERM');
};
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);
tollgate.once('exit', (code) => {
  for (const server of upstreams) server.close();
  process.exitCode = code ?? 0;
});
