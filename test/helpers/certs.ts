import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface SelfSigned {
  cert: Buffer;
  key: Buffer;
  /** SHA-256 fingerprint as Node prints it (`AA:BB:…`), to recognise the served certificate. */
  fingerprint256: string;
}

/** True when the `openssl` CLI is available (tests that need certificates skip otherwise). */
export function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * A fresh self-signed certificate for `commonName` (EC P-256: fast to generate), valid for that name
 * and 127.0.0.1 unless `ip: false` (then only for the name).
 */
export function selfSigned(commonName: string, { ip = true }: { ip?: boolean } = {}): SelfSigned {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-cert-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
        '-days',
        '2',
        '-subj',
        `/CN=${commonName}`,
        '-addext',
        `subjectAltName=DNS:${commonName}${ip ? ',IP:127.0.0.1' : ''}`,
      ],
      { stdio: 'ignore' },
    );
    const cert = readFileSync(join(dir, 'cert.pem'));
    const key = readFileSync(join(dir, 'key.pem'));
    return { cert, key, fingerprint256: new X509Certificate(cert).fingerprint256 };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * A directory laid out like a mounted `kubernetes.io/tls` Secret: `tls.crt` and `tls.key` are
 * symlinks into `..data`, itself a symlink to a timestamped directory; `swap` replaces the content
 * the way the kubelet does (new directory, then an atomic rename of the `..data` symlink).
 */
export class SecretVolume {
  readonly dir: string;
  #generation = 0;

  constructor(files: Record<string, Buffer | string>) {
    this.dir = mkdtempSync(join(tmpdir(), 'tollgate-secret-'));
    const first = this.#writeGeneration(files);
    symlinkSync(first, join(this.dir, '..data'));
    for (const name of Object.keys(files)) symlinkSync(join('..data', name), join(this.dir, name));
  }

  path(name: string): string {
    return join(this.dir, name);
  }

  swap(files: Record<string, Buffer | string>): void {
    const next = this.#writeGeneration(files);
    symlinkSync(next, join(this.dir, '..data_tmp'));
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  #writeGeneration(files: Record<string, Buffer | string>): string {
    const name = `..generation_${++this.#generation}`;
    const path = join(this.dir, name);
    mkdirSync(path);
    for (const [file, content] of Object.entries(files)) writeFileSync(join(path, file), content);
    return name;
  }
}
