// Usage: node measure.ts <label> <seconds> [ENV=VAL ...] [-- node flags]
import { spawn, execFile } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
const [label, secondsText, ...rest] = process.argv.slice(2);
const dash = rest.indexOf('--');
const envPairs = dash < 0 ? rest : rest.slice(0, dash);
const nodeFlags = dash < 0 ? [] : rest.slice(dash + 1);
const seconds = Number(secondsText);
const body = 'x'.repeat(100);
const upstream = http.createServer((_q, r) => { r.writeHead(200, { 'content-type': 'text/plain', 'content-length': 100 }); r.end(body); });
await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
const up = (upstream.address() as any).port;
const dir = mkdtempSync(join(tmpdir(), 'mem-'));
const base = 47000 + Math.floor(Math.random() * 1000);
writeFileSync(join(dir, 'main.yaml'), `proxy_address_http: 127.0.0.1:${base}\nconfig_address: 127.0.0.1:${base+1}\nadmin_address: 127.0.0.1:${base+2}\naccess_log: true\nlog_level: info\nmasterkey: abcdefabcdefabcdefabcdef\n`);
writeFileSync(join(dir, 'upstreams.yaml'), `provider: file\nupstreams:\n  DEFAULT:\n    paths:\n      "/":\n        servers: ["127.0.0.1:${up}"]\n`);
const env = { ...process.env } as Record<string,string>;
for (const p of envPairs) { const i = p.indexOf('='); env[p.slice(0,i)] = p.slice(i+1); }
const child = spawn(process.execPath, [...nodeFlags, 'dist/main.js', 'start', '--config', join(dir, 'main.yaml')], { env, stdio: ['ignore', 'pipe', 'inherit'] });
const get = (path: string) => new Promise<string>((res, rej) => http.get(`http://127.0.0.1:${base+2}${path}`, (r) => { let t=''; r.on('data', c => t+=c); r.on('end', () => res(t)); }).on('error', rej));
for (let i = 0; i < 100; i++) { try { await get('/readyz'); break; } catch { await new Promise(r => setTimeout(r, 100)); } }
const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]) / 1024;
const heap = async () => { const m = await get('/metrics'); const used = /^nodejs_heap_size_used_bytes (\S+)/m.exec(m)?.[1]; const total = /^nodejs_heap_size_total_bytes (\S+)/m.exec(m)?.[1]; const ext = /^nodejs_external_memory_bytes (\S+)/m.exec(m)?.[1]; return [used, total, ext].map(v => v ? (Number(v)/1048576).toFixed(0) : '?').join('/'); };
child.stdout!.on('data', () => {});
const start = rss();
const samples: number[] = [];
const wrk = execFile('wrk', ['-t2', '-c' + (process.env.CONNS ?? '64'), `-d${seconds}s`, `http://127.0.0.1:${base}/`], (e, out) => { console.log(label, 'wrk:', /Requests\/sec:\s+(\S+)/.exec(out)?.[1]); });
const timer = setInterval(() => samples.push(rss()), 500);
await new Promise((r) => wrk.on('exit', r));
clearInterval(timer);
const h = await heap();
const end = rss();
console.log(`${label}: start ${start.toFixed(0)} MB, peak ${Math.max(...samples).toFixed(0)} MB, end ${end.toFixed(0)} MB, heap used/total/external ${h} MB`);
child.kill('SIGKILL'); upstream.close();
