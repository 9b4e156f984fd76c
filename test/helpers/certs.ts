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

/** A client certificate issued by a TestCa: PEM certificate (with `chain` appended), key, identity. */
export interface IssuedCertificate {
  cert: Buffer;
  key: Buffer;
  /** SHA-256 of the DER, hex, as X-Forwarded-Client-Cert's Hash carries it. */
  sha256: string;
  pem: string;
}

/**
 * A certificate authority made with the `openssl` CLI: issues client certificates with chosen SANs,
 * intermediate CAs, and CRLs (`openssl ca -revoke`, `-gencrl`). EC P-256 throughout (fast).
 */
export class TestCa {
  readonly dir: string;
  readonly cert: Buffer;
  readonly #keyPath: string;
  readonly #certPath: string;
  #serial = 0;
  /** What `openssl ca -revoke` already recorded (it refuses a second revocation). */
  readonly #revoked = new Set<string>();

  constructor(commonName: string, issuer?: TestCa) {
    this.dir = mkdtempSync(join(tmpdir(), 'tollgate-ca-'));
    this.#keyPath = join(this.dir, 'ca.key');
    this.#certPath = join(this.dir, 'ca.pem');
    const ext = join(this.dir, 'ca.ext');
    writeFileSync(
      ext,
      'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\n',
    );
    if (issuer === undefined) {
      openssl([
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        this.#keyPath,
        '-out',
        this.#certPath,
        '-days',
        '2',
        '-subj',
        `/CN=${commonName}`,
        '-addext',
        'basicConstraints=critical,CA:TRUE',
        '-addext',
        'keyUsage=critical,keyCertSign,cRLSign',
      ]);
    } else {
      const csr = join(this.dir, 'ca.csr');
      openssl([
        'req',
        '-new',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        this.#keyPath,
        '-out',
        csr,
        '-subj',
        `/CN=${commonName}`,
      ]);
      issuer.#sign(csr, this.#certPath, ext);
    }
    this.cert = readFileSync(this.#certPath);
    writeFileSync(join(this.dir, 'index.txt'), '');
    writeFileSync(join(this.dir, 'crlnumber'), '01\n');
    writeFileSync(
      join(this.dir, 'ca.cnf'),
      [
        '[ca]',
        'default_ca = local',
        '[local]',
        `database = ${join(this.dir, 'index.txt')}`,
        `crlnumber = ${join(this.dir, 'crlnumber')}`,
        'default_md = sha256',
        'default_crl_days = 2',
        '',
      ].join('\n'),
    );
  }

  /** A client certificate; `chain` appends intermediates the client sends with it. */
  issue(
    commonName: string,
    {
      uris = [],
      dns = [],
      emails = [],
      chain = [],
    }: { uris?: string[]; dns?: string[]; emails?: string[]; chain?: Buffer[] } = {},
  ): IssuedCertificate {
    const name = `leaf-${++this.#serial}`;
    const keyPath = join(this.dir, `${name}.key`);
    const csr = join(this.dir, `${name}.csr`);
    const certPath = join(this.dir, `${name}.pem`);
    const ext = join(this.dir, `${name}.ext`);
    const sans = [
      ...uris.map((value, i) => `URI.${i + 1} = ${value}`),
      ...dns.map((value, i) => `DNS.${i + 1} = ${value}`),
      ...emails.map((value, i) => `email.${i + 1} = ${value}`),
    ];
    writeFileSync(
      ext,
      `basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n${sans.length > 0 ? 'subjectAltName=@alt\n[alt]\n' : ''}${sans.join('\n')}\n`,
    );
    openssl([
      'req',
      '-new',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      keyPath,
      '-out',
      csr,
      '-subj',
      `/O=Tollgate Tests/CN=${commonName}`,
    ]);
    this.#sign(csr, certPath, ext);
    const leaf = readFileSync(certPath);
    const x509 = new X509Certificate(leaf);
    return {
      cert: Buffer.concat([leaf, ...chain]),
      key: readFileSync(keyPath),
      sha256: x509.fingerprint256.replaceAll(':', '').toLowerCase(),
      pem: x509.toString(),
    };
  }

  /** A CRL listing `revoked` and every certificate revoked before; an empty one at first. */
  crl(revoked: IssuedCertificate[] = []): Buffer {
    const cnf = join(this.dir, 'ca.cnf');
    for (const certificate of revoked) {
      if (this.#revoked.has(certificate.sha256)) continue;
      this.#revoked.add(certificate.sha256);
      const path = join(this.dir, `revoke-${++this.#serial}.pem`);
      writeFileSync(path, certificate.pem);
      openssl(['ca', '-config', cnf, '-keyfile', this.#keyPath, '-cert', this.#certPath, '-revoke', path]);
    }
    const out = join(this.dir, `crl-${++this.#serial}.pem`);
    openssl([
      'ca',
      '-config',
      cnf,
      '-keyfile',
      this.#keyPath,
      '-cert',
      this.#certPath,
      '-gencrl',
      '-out',
      out,
    ]);
    return readFileSync(out);
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  #sign(csr: string, out: string, ext: string): void {
    openssl([
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      this.#certPath,
      '-CAkey',
      this.#keyPath,
      '-set_serial',
      String(Date.now() * 1000 + ++this.#serial),
      '-out',
      out,
      '-days',
      '2',
      '-extfile',
      ext,
    ]);
  }
}

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: 'ignore' });
}
