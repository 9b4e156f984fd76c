import { constants as cryptoConstants, type X509Certificate } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { SecureContext, TLSSocket, Server as TlsServer } from 'node:tls';
import type { ClientCaFiles } from '../config/file-checks.ts';
import type { ClientCertificateSettings } from '../config/types.ts';
import type { Logger } from '../log.ts';

/**
 * Client certificates on the TLS listener (docs/authentication.md#client-certificates).
 *
 * Node's TLS verifies: each TLS pair with a client-certificate check has its own secure context whose
 * trust store is the check's CA bundle (and CRL), chosen by SNI like the certificate. Whether a
 * handshake asks for a certificate at all is OpenSSL's per-connection verify mode, which Node sets
 * once from the server's `requestCert`; the SNI callback runs before the server's CertificateRequest
 * is written, so it sets the mode for the chosen name: hosts without a check never ask (browsers
 * holding certificates see no picker there), `require` hosts fail the handshake without one
 * (OpenSSL's certificate_required alert). What OpenSSL cannot enforce per name (a certificate that
 * does not verify, a chain deeper than verify_depth) is checked when the handshake completes, before
 * any request is read: `require` closes the connection, `optional` records why it was not accepted.
 * Sessions are never resumed while a check is configured, so every connection's certificate is
 * verified against the CA and CRL live at that time.
 *
 * Checks also come and go with Kubernetes objects (Ingress `auth-tls-*` annotations, a Gateway's
 * `spec.tls.frontend`): the first one to appear turns enforcement on for the attached servers
 * (`enforce`), and it stays on until a restart, so a session issued before can never skip a check.
 */

/** One client-certificate check as the listener applies it. */
export interface ClientCertificatePolicy {
  /** The config key of its block (`tls_client_certificates`, `tls_certificates[0].client_certificates`…). */
  readonly key: string;
  readonly mode: ClientCertificateSettings['mode'];
  readonly verifyDepth: number;
  readonly files: ClientCaFiles;
}

/** What a connection's handshake established about its client. */
export interface PeerIdentity {
  /** The check the connection's server name selected. */
  readonly policyKey: string;
  /** The verified certificate; null when none was sent or it was not accepted (`error` says why). */
  readonly certificate: X509Certificate | null;
  readonly error: string | null;
}

const POLICY = Symbol('tollgate.clientCertificatePolicy');
const PEER = Symbol('tollgate.peerIdentity');

interface MarkedSocket extends TLSSocket {
  [POLICY]?: ClientCertificatePolicy | null;
  [PEER]?: PeerIdentity | null;
  /** Node's TLSWrap, to set this connection's verify mode (see above). */
  _handle?: { setVerifyMode?: (requestCert: boolean, rejectUnauthorized: boolean) => void } | null;
}

export interface ClientVerification {
  /** Server options to merge: ask for certificates when any check exists, never resume sessions. */
  readonly serverOptions: { requestCert: true; rejectUnauthorized: false; secureOptions: number } | null;
  /** Whether handshakes are checked now (a check exists, or existed since start). */
  readonly enforcing: boolean;
  /**
   * Turns checking on for the attached servers and those attached later (a check appeared); true
   * when it was off, so the caller rebuilds the default context with `serverOptions.secureOptions`.
   */
  enforce(): boolean;
  /** For the TLS server's SNICallback: `select` gives the context and policy for a name (null = default). */
  sniCallback(
    select: (servername: string) => { context: SecureContext; policy: ClientCertificatePolicy | null } | null,
  ): (servername: string, callback: (error: Error | null, context?: SecureContext) => void) => void;
  /** Checks every completed handshake of `server`. */
  attach(server: TlsServer): void;
}

/**
 * `anyPolicy`: whether some TLS pair of main.yaml has a check at start (`enforce` turns it on later).
 * `defaultPolicy`: the check of handshakes served the listener's default certificate (no or unknown SNI).
 */
export function createClientVerification(options: {
  anyPolicy: boolean;
  defaultPolicy: () => ClientCertificatePolicy | null;
  logger: Logger;
}): ClientVerification {
  const { logger } = options;
  const checking = {
    requestCert: true,
    rejectUnauthorized: false,
    // TLS 1.2 tickets and TLS 1.3 stateless tickets; Node keeps no server-side session cache.
    secureOptions: cryptoConstants.SSL_OP_NO_TICKET,
  } as const;
  let enforcing = options.anyPolicy;
  const servers = new Set<TlsServer>();
  // Node reads requestCert and rejectUnauthorized from the server for each new connection
  // (_tls_wrap's tlsConnectionListener): setting them turns checking on from the next handshake.
  const askOn = (server: TlsServer) => {
    const settable = server as TlsServer & { requestCert?: boolean; rejectUnauthorized?: boolean };
    settable.requestCert = true;
    settable.rejectUnauthorized = false;
  };
  return {
    get serverOptions() {
      return enforcing ? checking : null;
    },
    get enforcing() {
      return enforcing;
    },
    enforce() {
      if (enforcing) return false;
      enforcing = true;
      for (const server of servers) askOn(server);
      logger.info(
        { event: 'client_certificates_enforced' },
        'a client-certificate check appeared: TLS sessions are no longer resumed',
      );
      return true;
    },
    sniCallback(select) {
      return function (this: MarkedSocket, servername, callback) {
        const chosen = select(servername);
        const policy = chosen === null ? options.defaultPolicy() : chosen.policy;
        if (enforcing) {
          this[POLICY] = policy;
          // Absent on some future Node: every name then asks (requestCert), and `require` is still
          // enforced below, after the handshake.
          this._handle?.setVerifyMode?.(policy !== null, policy?.mode === 'require');
        }
        callback(null, chosen?.context);
      };
    },
    attach(server) {
      servers.add(server);
      if (enforcing) askOn(server);
      // First, so a refused connection is closed before HTTP/1.1 or HTTP/2 reads anything from it.
      server.prependListener('secureConnection', (socket: MarkedSocket) => {
        if (!enforcing) return;
        const policy = socket[POLICY] === undefined ? options.defaultPolicy() : socket[POLICY];
        if (policy === null) {
          socket[PEER] = null;
          return;
        }
        const identity = verifyPeer(socket, policy);
        if (identity.certificate === null && policy.mode === 'require') {
          logger.debug(
            { event: 'client_certificate_refused', check: policy.key, reason: identity.error },
            'TLS connection closed: no acceptable client certificate',
          );
          socket.destroy();
          return;
        }
        socket[PEER] = identity;
      });
    },
  };
}

function verifyPeer(socket: TLSSocket, policy: ClientCertificatePolicy): PeerIdentity {
  const refused = (error: string): PeerIdentity => ({ policyKey: policy.key, certificate: null, error });
  let certificate: X509Certificate | undefined;
  try {
    certificate = socket.getPeerX509Certificate();
  } catch {
    return refused('unreadable certificate');
  }
  if (certificate === undefined) return refused('no certificate');
  if (!socket.authorized) return refused(String(socket.authorizationError ?? 'not verified'));
  const depth = chainDepth(certificate, policy.files.authorities);
  if (depth > policy.verifyDepth) return refused(`chain deeper than verify_depth ${policy.verifyDepth}`);
  return { policyKey: policy.key, certificate, error: null };
}

/**
 * How many certificates stand above `leaf` up to a root of `authorities`, OpenSSL having verified the
 * chain already. Node does not expose the intermediates a client sends: one issuer missing from the
 * bundle counts as a single level, which makes the default (1: issued by a CA of the bundle) exact.
 */
export function chainDepth(leaf: X509Certificate, authorities: readonly X509Certificate[]): number {
  let current = leaf;
  for (let depth = 1; depth <= authorities.length + 1; depth++) {
    const issuer = authorities.find((ca) => current.checkIssued(ca) && current.verify(ca.publicKey));
    if (issuer === undefined) return depth + 1;
    if (issuer.checkIssued(issuer)) return depth;
    current = issuer;
  }
  return Number.POSITIVE_INFINITY;
}

/**
 * The handshake's finding for the connection a request came on, or null when its server name has no
 * client-certificate check (or it is not a TLS connection). HTTP/2 requests reach the TLS socket
 * through node:http2's socket proxy, which forwards property reads.
 */
export function peerIdentityOf(req: IncomingMessage): PeerIdentity | null {
  try {
    return (req.socket as MarkedSocket)[PEER] ?? null;
  } catch {
    // The HTTP/2 proxy throws once its stream is gone.
    return null;
  }
}

/** The key of the check the request's connection was set up under (its server name's, else the default's). */
export function connectionPolicyKey(
  req: IncomingMessage,
  defaultPolicy: () => ClientCertificatePolicy | null,
): string | null {
  let policy: ClientCertificatePolicy | null | undefined;
  try {
    policy = (req.socket as MarkedSocket)[POLICY];
  } catch {
    return null;
  }
  return (policy === undefined ? defaultPolicy() : policy)?.key ?? null;
}
