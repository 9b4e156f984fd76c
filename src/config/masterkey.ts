import { readFileSync } from 'node:fs';
import { issueAt } from './positions.ts';
import { readErrorReason } from './read-error.ts';
import type { ConfigIssue, MainConfig, UpstreamsConfig } from './types.ts';

/**
 * The one place that decides which masterkey is live and whether the sources agree. Validation
 * (`tollgate validate`, start, every reload) calls resolveMasterkey; the running process
 * (sources/masterkey, which also follows masterkey_file as it rotates) calls agreeOnMasterkey and
 * keyFromMasterkeyFileText. So a config that validates is never refused for its masterkey later, and
 * problems point at the line that set the key. Precedence is documented in docs/configuration.md:
 * env `TOLLGATE_MASTERKEY` wins outright; otherwise main.yaml (`masterkey`, else `masterkey_file`)
 * and upstreams.yaml `masterkey` must agree when both are set.
 */

export type MasterkeyResolution =
  | { ok: true; masterkey: string | null }
  | { ok: false; issues: ConfigIssue[] };

export type MainMasterkeySources = Pick<MainConfig, 'masterkey' | 'masterkeyFile'>;
export type UpstreamsMasterkeySource = Pick<UpstreamsConfig, 'masterkey'>;

type MasterkeyKey = 'masterkey' | 'masterkey_file';

/** An empty value is treated as unset: an empty masterkey would let anyone mint tokens. */
const present = (value: string | null | undefined): value is string =>
  typeof value === 'string' && value !== '';

/**
 * The key a masterkey_file holds, or null when it holds none: one trailing newline (as `echo` and
 * most editors add) is not part of it, and an empty key is no key (it would let anyone mint tokens).
 */
export function keyFromMasterkeyFileText(text: string): string | null {
  const key = text.replace(/\r?\n$/, '');
  return key === '' ? null : key;
}

const refuse = (config: object | null, key: MasterkeyKey, fallbackFile: string, message: string) => ({
  ok: false as const,
  issues: [issueAt(config, key, fallbackFile, message)],
});

/**
 * The precedence itself, given what masterkey_file holds (already read, null when main.yaml does not
 * use it): env wins outright; otherwise main.yaml's key and upstreams.yaml's must be equal when both
 * are set. Never reads anything, so the running process can re-decide when either file changes.
 */
export function agreeOnMasterkey(
  main: MainMasterkeySources,
  fileKey: string | null,
  upstreams: UpstreamsMasterkeySource | null,
  env: NodeJS.ProcessEnv = process.env,
): MasterkeyResolution {
  const fromEnv = env.TOLLGATE_MASTERKEY;
  if (present(fromEnv)) return { ok: true, masterkey: fromEnv };
  const inline = present(main.masterkey);
  const fromMain = inline ? main.masterkey : present(fileKey) ? fileKey : null;
  const fromUpstreams = present(upstreams?.masterkey) ? upstreams.masterkey : null;
  if (fromMain !== null && fromUpstreams !== null && fromMain !== fromUpstreams) {
    // Never print either value: say only which sources disagree.
    const mainSource = inline ? 'main.yaml' : `masterkey_file (${main.masterkeyFile})`;
    return refuse(
      upstreams,
      'masterkey',
      'upstreams.yaml',
      `this masterkey differs from the one in ${mainSource}`,
    );
  }
  return { ok: true, masterkey: fromMain ?? fromUpstreams };
}

/** Whether main.yaml's masterkey comes from masterkey_file (an inline `masterkey` wins over it). */
export function usesMasterkeyFile(main: MainMasterkeySources, env: NodeJS.ProcessEnv = process.env): boolean {
  return !present(env.TOLLGATE_MASTERKEY) && !present(main.masterkey) && present(main.masterkeyFile);
}

/** Reads masterkey_file when main.yaml uses it, then applies the precedence. */
export function resolveMasterkey(
  main: MainMasterkeySources,
  upstreams: UpstreamsMasterkeySource | null,
  env: NodeJS.ProcessEnv = process.env,
): MasterkeyResolution {
  if (!usesMasterkeyFile(main, env)) return agreeOnMasterkey(main, null, upstreams, env);
  const path = main.masterkeyFile as string;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const reason = readErrorReason(error);
    return refuse(main, 'masterkey_file', 'main.yaml', `cannot read ${path}: ${reason}`);
  }
  const fileKey = keyFromMasterkeyFileText(text);
  if (fileKey === null) {
    return refuse(
      main,
      'masterkey_file',
      'main.yaml',
      `${path} is empty: an empty masterkey would let anyone mint tokens`,
    );
  }
  return agreeOnMasterkey(main, fileKey, upstreams, env);
}
