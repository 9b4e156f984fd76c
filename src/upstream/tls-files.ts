import { readFileSync } from 'node:fs';
import { checkTlsPair, parseCaBundle } from '../config/file-checks.ts';
import type { Logger } from '../log.ts';
import { concernChanges, forEachRouteServer } from '../routing/table-change.ts';
import type { Route, RoutingTable, UpstreamTlsSettings } from '../routing/types.ts';
import type { FileWatcher } from '../sources/files.ts';

/** The `file` label of the reload metrics and the name in logs, for every upstream TLS file. */
export const UPSTREAM_TLS_METRIC_NAME = 'upstream_tls';

/** What a TLS connection to an upstream needs from files: CA certificates, a client certificate and key. */
export interface TlsFileMaterial {
  /** Extra trusted CAs (beside the system ones), or null for the system CAs only. */
  ca: string[] | null;
  cert: string | null;
  key: string | null;
}

/**
 * The PEM files of upstream TLS (docs/traffic.md#tls-to-upstreams): main.yaml's `upstream_ca_file`
 * and each path's `upstream_tls` `ca_file`, `certificate` and `key`. Read when first needed (validation
 * has just checked them), then followed with the file watcher: a change that parses replaces the copy
 * and every pool using it (new connections use it, requests in flight finish on theirs); a broken one
 * is logged and counted, and the last good copy stays (the last-good rule of docs/reload.md).
 */
export class UpstreamTlsFiles {
  readonly #globalCaFile: string | null;
  readonly #texts = new Map<string, string>();
  readonly #listeners: Array<(paths: readonly string[]) => void> = [];
  #watched = '';
  /** The table `follow` was last given. */
  /** Whether a table may dial other TLS servers than the one followed last. */
  readonly #tlsMayChange = concernChanges(dialsTls);

  constructor(globalCaFile: string | null) {
    this.#globalCaFile = globalCaFile;
  }

  /** The material for one server's settings; throws when a file cannot be read (a pool then fails). */
  material(settings: UpstreamTlsSettings): TlsFileMaterial {
    const inline = settings.inline ?? null;
    const caFile = settings.caFile ?? this.#globalCaFile;
    // A Secret's PEM (an Ingress `proxy-ssl-secret`): checked by the Ingress translation; its CA, when
    // it has one, replaces upstream_ca_file's as a path's ca_file does.
    if (inline !== null)
      return {
        ca:
          inline.ca !== null
            ? parseCaBundle(inline.ca, 'proxy-ssl-secret', 'ca.crt')
            : caFile === null
              ? null
              : parseCaBundle(this.#text(caFile), caFile, 'ca_file'),
        cert: inline.cert,
        key: inline.key,
      };
    return {
      ca: caFile === null ? null : parseCaBundle(this.#text(caFile), caFile, 'ca_file'),
      cert: settings.certificateFile === null ? null : this.#text(settings.certificateFile),
      key: settings.keyFile === null ? null : this.#text(settings.keyFile),
    };
  }

  /** Called with the paths whose content changed, after the new copies are in place. */
  onChange(listener: (paths: readonly string[]) => void): void {
    this.#listeners.push(listener);
  }

  /**
   * Watches the files the live table's TLS servers name (and `upstream_ca_file`), again after every
   * swap that changes that set: a CA bundle on its own, a certificate with its key as one pair.
   */
  async follow(files: FileWatcher, table: RoutingTable, logger: Logger): Promise<void> {
    // The same TLS servers, so the same files (an endpoint change of plain-HTTP routes reads none).
    if (!this.#tlsMayChange(table)) return;
    const entries = this.#entriesOf(table);
    const id = JSON.stringify(entries);
    if (id === this.#watched) return;
    this.#watched = id;
    files.unwatch(UPSTREAM_TLS_METRIC_NAME);
    for (const paths of entries) {
      try {
        await files.watchFiles({
          name: UPSTREAM_TLS_METRIC_NAME,
          paths,
          parse: (texts) => {
            // The readers validation uses (config/file-checks), so a reload accepts what a start would.
            const [first = '', second = ''] = paths;
            if (paths.length === 2)
              checkTlsPair(Buffer.from(texts[0] ?? ''), Buffer.from(texts[1] ?? ''), {
                certFile: first,
                keyFile: second,
                certKey: 'certificate',
                keyKey: 'key',
              });
            else parseCaBundle(texts[0] ?? '', first, 'ca_file');
            return texts;
          },
          apply: (texts) => this.#replace(paths, texts),
          messages: {
            applied: 'upstream TLS file reloaded; new upstream connections use it',
            rejected:
              'upstream TLS file not reloaded: the new content is not usable, the previous copy stays',
          },
        });
      } catch (error) {
        // Validation read the file moments ago; it broke since. The copy in memory (if any) stays.
        logger.error({ err: (error as Error).message, paths }, 'cannot watch an upstream TLS file');
      }
    }
  }

  #entriesOf(table: RoutingTable): string[][] {
    const cas = new Set<string>();
    const pairs = new Map<string, string[]>();
    if (this.#globalCaFile !== null) cas.add(this.#globalCaFile);
    for (const server of table.servers) {
      const tls = server.transport.tls;
      if (tls === null) continue;
      if (tls.caFile !== null) cas.add(tls.caFile);
      if (tls.certificateFile !== null && tls.keyFile !== null)
        pairs.set(`${tls.certificateFile}\n${tls.keyFile}`, [tls.certificateFile, tls.keyFile]);
    }
    return [
      ...[...cas].sort().map((path) => [path]),
      ...[...pairs.keys()].sort().map((k) => pairs.get(k) as string[]),
    ];
  }

  #text(path: string): string {
    let text = this.#texts.get(path);
    if (text === undefined) {
      text = readFileSync(path, 'utf8');
      this.#texts.set(path, text);
    }
    return text;
  }

  #replace(paths: readonly string[], texts: readonly string[]): void {
    const changed: string[] = [];
    paths.forEach((path, index) => {
      const text = texts[index] ?? '';
      if (this.#texts.get(path) === text) return;
      this.#texts.set(path, text);
      changed.push(path);
    });
    if (changed.length === 0) return;
    for (const listener of this.#listeners) listener(changed);
  }
}

/** Whether a server's connections depend on one of these files. */
export function usesTlsFile(
  settings: UpstreamTlsSettings | null,
  paths: readonly string[],
  globalCaFile: string | null,
): boolean {
  if (settings === null) return false;
  const ca = settings.caFile ?? globalCaFile;
  return paths.some((path) => path === ca || path === settings.certificateFile || path === settings.keyFile);
}

/** A server of the route (its mirrors' included) is dialled with TLS. */
function dialsTls(route: Route): boolean {
  let tls = false;
  forEachRouteServer(route, (server) => {
    if (server.transport.tls !== null) tls = true;
  });
  return tls;
}
