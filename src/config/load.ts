import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { checkRuntimeFiles } from './file-checks.ts';
import { resolveMasterkey } from './masterkey.ts';
import { noteConfigParsed } from './parse-memory.ts';
import { rememberPosition } from './positions.ts';
import { readErrorReason } from './read-error.ts';
import type { ConfigIssue, MainConfig, UpstreamsConfig } from './types.ts';
import { validateMain } from './validate-main.ts';
import { checkOidcReferences } from './validate-oidc.ts';
import { emptyUpstreamsConfig, validateUpstreams } from './validate-upstreams.ts';
import { YamlReader } from './yaml-reader.ts';

export type Loaded<T> = { ok: true; value: T } | { ok: false; issues: ConfigIssue[] };

/** Parses and validates main.yaml. `file` is its path; relative paths inside resolve against its dir. */
export function parseMainConfig(text: string, file: string): Loaded<MainConfig> {
  const reader = new YamlReader(text, file);
  if (!reader.wellFormed) return { ok: false, issues: reader.issues };
  const { config } = validateMain(reader, resolve(file));
  if (reader.issues.length > 0) return { ok: false, issues: inFileOrder(reader.issues) };
  rememberMainPositions(reader, config);
  return { ok: true, value: config };
}

/** Parses and validates upstreams.yaml; `hash` is the sha256 of the text, as the reloader compares it. */
export function parseUpstreamsConfig(text: string, file: string): Loaded<UpstreamsConfig> {
  noteConfigParsed(text.length);
  const reader = new YamlReader(text, file);
  if (!reader.wellFormed) return { ok: false, issues: reader.issues };
  const config = validateUpstreams(reader, resolve(file), sha256Hex(text));
  if (reader.issues.length > 0) return { ok: false, issues: inFileOrder(reader.issues) };
  const masterkeyAt = reader.locateTopLevelValue('masterkey');
  if (masterkeyAt) rememberPosition(config, 'masterkey', { file, ...masterkeyAt });
  return { ok: true, value: config };
}

/** Keys naming something checked after validation (config/masterkey, config/file-checks). */
const KEYS_WITH_POSITIONS = [
  'masterkey_file',
  'revoked_tokens_file',
  'tls_certificate',
  'tls_key_file',
  'upstream_ca_file',
  'session_secret_file',
];

function rememberMainPositions(reader: YamlReader, config: MainConfig): void {
  const masterkeyAt = reader.locateTopLevelValue('masterkey') ?? reader.locateTopLevelValue('master_key');
  if (masterkeyAt) rememberPosition(config, 'masterkey', { file: reader.file, ...masterkeyAt });
  for (const key of KEYS_WITH_POSITIONS) {
    const at = reader.locateTopLevelValue(key);
    if (at) rememberPosition(config, key, { file: reader.file, ...at });
  }
  const kubeconfigAt = reader.locateNestedValue(['kubernetes', 'kubeconfig']);
  if (kubeconfigAt) rememberPosition(config, 'kubernetes.kubeconfig', { file: reader.file, ...kubeconfigAt });
}

/**
 * Rules spanning both files, run at load and on every upstreams.yaml change: the masterkey agreement,
 * decided by the same resolver the running process uses (config/masterkey), and the files
 * upstreams.yaml names (config/file-checks), so validation and start cannot disagree. Messages never
 * contain secret values.
 */
export function checkConsistency(
  main: MainConfig,
  upstreams: UpstreamsConfig,
  env: NodeJS.ProcessEnv = process.env,
): ConfigIssue[] {
  const resolved = resolveMasterkey(main, upstreams, env);
  return [
    ...(resolved.ok ? [] : resolved.issues),
    ...checkOidcReferences(main, upstreams),
    ...checkRuntimeFiles(main, upstreams, 'upstreams'),
  ];
}

/** masterkey_file's own problems (unreadable, empty), when upstreams.yaml cannot be had to agree with. */
function masterkeyFileIssues(main: MainConfig): ConfigIssue[] {
  const resolved = resolveMasterkey(main, null);
  return resolved.ok ? [] : resolved.issues;
}

/**
 * Reads and validates both files, collecting every problem of both (the upstreams file is still
 * checked when main.yaml has problems, as long as its location is known).
 */
export async function loadConfig(
  mainPath: string,
): Promise<Loaded<{ main: MainConfig; upstreams: UpstreamsConfig }>> {
  const mainFile = resolve(mainPath);
  const mainText = await readConfigFile(mainFile, mainPath);
  if (!mainText.ok) return mainText;

  const mainReader = new YamlReader(mainText.value, mainPath);
  let main: MainConfig | null = null;
  // main.yaml as far as it validated: its files are checked even while other keys have problems,
  // so validate reports every problem in one pass (docs/cli.md); a key that failed is simply unset.
  let partialMain: MainConfig | null = null;
  let upstreamsPath: string | null = null;
  let upstreamsConfWritten: string | null = null;
  if (mainReader.wellFormed) {
    const validated = validateMain(mainReader, mainFile);
    if (validated.upstreamsConfKnown) upstreamsPath = validated.config.upstreamsConf;
    upstreamsConfWritten = validated.upstreamsConfWritten;
    partialMain = validated.config;
    rememberMainPositions(mainReader, partialMain);
    if (mainReader.issues.length === 0) main = validated.config;
  }
  /**
   * main.yaml's problems: its own, and those of the files it names (checked with `upstreams`; without
   * it, masterkey_file is read here, as checkConsistency cannot run).
   */
  const mainIssues = (upstreams: UpstreamsConfig | null) =>
    inFileOrder([
      ...mainReader.issues,
      ...(partialMain === null ? [] : checkRuntimeFiles(partialMain, upstreams, 'main')),
      ...(partialMain === null || upstreams !== null ? [] : masterkeyFileIssues(partialMain)),
    ]);
  if (upstreamsPath === null) return { ok: false, issues: mainIssues(null) };

  // Messages name the upstreams file the way the operator named main.yaml: relative stays relative.
  const shownPath = isAbsolute(mainPath) ? upstreamsPath : relative(process.cwd(), upstreamsPath);
  const text = await readConfigFile(upstreamsPath, shownPath);
  if (!text.ok && text.missing && main?.kubernetes?.upstreamsConfigMap) {
    // Read through the API instead of the file (docs/kubernetes.md): start with no routes and stay
    // unready until the ConfigMap's copy is live.
    const upstreams = awaitingConfigMap(upstreamsPath);
    const unusable = [...checkConsistency(main, upstreams), ...checkRuntimeFiles(main, upstreams, 'main')];
    if (unusable.length > 0) return { ok: false, issues: unusable };
    return { ok: true, value: { main, upstreams } };
  }
  if (!text.ok) {
    const missing = text.unreadable
      ? whyUpstreamsUnreadable(mainReader, upstreamsConfWritten, upstreamsPath, text.unreadable)
      : text.issues;
    return { ok: false, issues: inFileOrder([...mainIssues(null), ...missing]) };
  }
  const upstreams = parseUpstreamsConfig(text.value, shownPath);
  if (!upstreams.ok) return { ok: false, issues: [...mainIssues(null), ...upstreams.issues] };
  // Every file main.yaml names and the process reads, with the readers the process uses (validate
  // and start both load through here, docs/configuration.md).
  const issues = mainIssues(upstreams.value);
  // partialMain is set: upstreamsPath came from it. The masterkey agreement too, beside the rest.
  const mismatches = checkConsistency(main ?? (partialMain as MainConfig), upstreams.value);
  if (main === null || mismatches.length > 0 || issues.length > 0) {
    const inMain = (issue: ConfigIssue) => issue.file === mainReader.file;
    return {
      ok: false,
      issues: [
        ...inFileOrder([...issues, ...mismatches.filter(inMain)]),
        ...mismatches.filter((issue) => !inMain(issue)),
      ],
    };
  }
  return { ok: true, value: { main, upstreams: upstreams.value } };
}

/**
 * An upstreams file that cannot be read is main.yaml's problem: it is reported on main.yaml's
 * `upstreams_conf` line (or as main.yaml's default when the key is absent), with the absolute path it
 * resolved to, since a path written relative to the working directory (as some proxies take it) is
 * the usual cause.
 */
function whyUpstreamsUnreadable(
  mainReader: YamlReader,
  written: string | null,
  resolved: string,
  reason: string,
): ConfigIssue[] {
  const at = mainReader.locateTopLevelValue('upstreams_conf');
  if (written === null || at === undefined) {
    const message =
      `not set, so the default upstreams.yaml beside main.yaml is used, and ${resolved} cannot be read: ` +
      `${reason}`;
    return [{ file: mainReader.file, line: 0, column: 0, path: 'upstreams_conf', message }];
  }
  const relativeNote = isAbsolute(written)
    ? ''
    : ` (a relative path is resolved against main.yaml's directory, giving ${resolved})`;
  return [
    {
      file: mainReader.file,
      ...at,
      path: 'upstreams_conf',
      message: `cannot read '${written}': ${reason}${relativeNote}`,
    },
  ];
}

const configMapPlaceholders = new WeakSet<UpstreamsConfig>();

/**
 * The upstreams config of a start whose `kubernetes.upstreams_configmap` has no file mounted: no
 * routes, until the ConfigMap read through the API replaces it.
 */
function awaitingConfigMap(file: string): UpstreamsConfig {
  const config = emptyUpstreamsConfig(file, '', 'kubernetes');
  configMapPlaceholders.add(config);
  return config;
}

/** True for the config of a start that waits for its upstreams ConfigMap (no file was mounted). */
export function waitsForConfigMap(config: UpstreamsConfig): boolean {
  return configMapPlaceholders.has(config);
}

/** For hot reload: re-reads the upstreams file named by an already validated main.yaml. */
export async function loadUpstreams(main: MainConfig): Promise<Loaded<UpstreamsConfig>> {
  const upstreams = await readAndParseUpstreams(main.upstreamsConf);
  if (!upstreams.ok) return upstreams;
  const mismatches = checkConsistency(main, upstreams.value);
  return mismatches.length > 0 ? { ok: false, issues: mismatches } : upstreams;
}

/** `shown` is the path put in issues; the config itself always records the absolute path. */
async function readAndParseUpstreams(file: string, shown = file): Promise<Loaded<UpstreamsConfig>> {
  const text = await readConfigFile(file, shown);
  if (!text.ok) return text;
  return parseUpstreamsConfig(text.value, shown);
}

type FileText =
  | { ok: true; value: string }
  | { ok: false; issues: ConfigIssue[]; unreadable?: string; missing?: boolean };

/**
 * The file's text, or one position-less issue saying why it cannot be read; `unreadable` holds the
 * reason when the file could not be opened at all (rather than holding something other than text).
 */
async function readConfigFile(file: string, shown: string): Promise<FileText> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (error) {
    const reason = readErrorReason(error);
    return {
      ok: false,
      issues: [{ file: shown, line: 0, column: 0, path: '', message: `cannot read ${shown}: ${reason}` }],
      unreadable: reason,
      missing: (error as NodeJS.ErrnoException).code === 'ENOENT',
    };
  }
  try {
    // ignoreBOM keeps a BOM in the text, so the hash of the text is the hash of the file's bytes.
    return { ok: true, value: new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes) };
  } catch {
    return {
      ok: false,
      issues: [
        { file: shown, line: 0, column: 0, path: '', message: `cannot read ${shown}: not UTF-8 text` },
      ],
    };
  }
}

/** Validators report in the order they check; people read a file top to bottom. */
function inFileOrder(issues: ConfigIssue[]): ConfigIssue[] {
  return issues.toSorted((a, b) => a.line - b.line || a.column - b.column);
}

/**
 * The config hash (`tollgate_config_info{hash}`): sha256 of the file's bytes. The watcher hashes
 * the bytes it reads with this same function, so "unchanged" means the same thing in both places.
 */
export function sha256Hex(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}
