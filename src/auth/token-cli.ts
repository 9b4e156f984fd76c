import { parseArgs } from 'node:util';
import { formatIssue } from '../config/issues.ts';
import { loadConfig } from '../config/load.ts';
import { resolveMasterkey } from '../sources/masterkey.ts';
import { parseScope, type ScopeEntry } from './scope.ts';
import { deriveSigningKey, issueToken, isValidOwner, MAX_OWNER_LENGTH } from './tokens.ts';

const USAGE = `Usage: tollgate token --config main.yaml --owner NAME --valid MINUTES [--scope S]...

Prints a token signed with the configured masterkey (main.yaml masterkey / masterkey_file,
upstreams.yaml masterkey, or TOLLGATE_MASTERKEY), exactly as POST /jwt would issue it, and nothing
else on stdout. For scripts and break-glass use: no token API, no master key on the wire.

  --owner NAME     the subject sent upstream as X-Tollgate-Subject
  --valid MINUTES  1 to max_token_minutes
  --scope S        'host/path-prefix' or '/path-prefix'; repeat for up to 16 entries

--config falls back to $TOLLGATE_CONFIG, then ./main.yaml. Errors go to stderr, with exit code 1.
`;

export interface TokenCliIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
}

/** `tollgate token`: returns the exit code (0 printed a token, 1 anything else). */
export async function runTokenCommand(
  argv: string[],
  io: TokenCliIo = { stdout: process.stdout, stderr: process.stderr, env: process.env },
): Promise<number> {
  const fail = (message: string): number => {
    io.stderr.write(`tollgate token: ${message}\n`);
    return 1;
  };
  let values: { config?: string; owner?: string; valid?: string; scope?: string[]; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        config: { type: 'string', short: 'c' },
        owner: { type: 'string' },
        valid: { type: 'string' },
        scope: { type: 'string', multiple: true },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (error) {
    return fail(`${(error as Error).message}\n\n${USAGE}`);
  }
  if (values.help) {
    io.stdout.write(USAGE);
    return 0;
  }
  if (values.owner === undefined) return fail('--owner is required');
  if (!isValidOwner(values.owner)) {
    return fail(
      `--owner must be 1 to ${MAX_OWNER_LENGTH} characters of valid Unicode without control characters`,
    );
  }
  if (values.valid === undefined) return fail('--valid is required: the token lifetime in minutes');

  const loaded = await loadConfig(values.config || io.env.TOLLGATE_CONFIG || 'main.yaml');
  if (!loaded.ok) {
    for (const issue of loaded.issues) io.stderr.write(`${formatIssue(issue)}\n`);
    return fail('the configuration is not valid');
  }
  const { main, upstreams } = loaded.value;
  const minutes = Number(values.valid);
  if (!/^\d+$/.test(values.valid) || minutes < 1 || minutes > main.maxTokenMinutes) {
    return fail(`--valid must be an integer number of minutes from 1 to ${main.maxTokenMinutes}`);
  }
  let scope: readonly ScopeEntry[] | null = null;
  if (values.scope !== undefined) {
    const parsed = parseScope(values.scope, '--scope');
    if (!parsed.ok) return fail(parsed.message);
    scope = parsed.scope;
  }
  let masterkey: string | null;
  try {
    masterkey = resolveMasterkey(main, upstreams, io.env);
  } catch (error) {
    return fail((error as Error).message);
  }
  if (masterkey === null) {
    return fail('no masterkey is configured (masterkey, masterkey_file or TOLLGATE_MASTERKEY)');
  }
  const issued = await issueToken(deriveSigningKey(masterkey), {
    owner: values.owner,
    validMinutes: minutes,
    scope,
  });
  io.stdout.write(`${issued.token}\n`);
  return 0;
}
