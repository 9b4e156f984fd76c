import { DEFAULT_LOG_N, hashPassword, MAX_LOG_N, MIN_LOG_N } from './password.ts';

const USAGE = `Usage: tollgate hash-password [--log-n N]

Reads a password on stdin and prints its salted scrypt hash, for a basic-auth user in upstreams.yaml:

  printf '%s' 'the password' | tollgate hash-password

  authorization:
    type: basic
    users:
      - username: alice
        password_hash: "scrypt$ln=15,…"

One trailing newline on stdin is not part of the password. On a terminal the password is read
without echo. --log-n sets the scrypt cost as log2 N (default ${DEFAULT_LOG_N}, ${MIN_LOG_N}..${MAX_LOG_N}).
`;

export interface HashPasswordIo {
  stdin: NodeJS.ReadStream;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/** `tollgate hash-password`: returns the process exit code (0 printed a hash, 2 usage error, 1 no password). */
export async function runHashPassword(
  argv: string[],
  io: HashPasswordIo = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr },
): Promise<number> {
  let logN = DEFAULT_LOG_N;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') {
      io.stdout.write(USAGE);
      return 0;
    }
    const value =
      arg === '--log-n' ? argv[++i] : arg?.startsWith('--log-n=') ? arg.slice('--log-n='.length) : null;
    const parsed = Number(value);
    if (value == null || !Number.isInteger(parsed) || parsed < MIN_LOG_N || parsed > MAX_LOG_N) {
      io.stderr.write(`hash-password: unexpected argument ${JSON.stringify(arg)}\n\n${USAGE}`);
      return 2;
    }
    logN = parsed;
  }

  const input = io.stdin.isTTY ? await promptWithoutEcho(io) : await readAll(io.stdin);
  const password = input.replace(/\r?\n$/, '');
  if (password === '') {
    io.stderr.write('hash-password: no password given on stdin\n');
    return 1;
  }
  io.stdout.write(`${await hashPassword(password, logN)}\n`);
  return 0;
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return Buffer.concat(chunks).toString('utf8');
}

/** Reads one line from a terminal in raw mode so the password is not echoed. */
function promptWithoutEcho(io: HashPasswordIo): Promise<string> {
  const { stdin } = io;
  io.stderr.write('Password: ');
  stdin.setRawMode(true);
  stdin.setEncoding('utf8');
  let line = '';
  return new Promise((resolve) => {
    const finish = (value: string) => {
      stdin.setRawMode(false);
      stdin.pause();
      stdin.off('data', onData);
      io.stderr.write('\n');
      resolve(value);
    };
    const onData = (text: string) => {
      for (const char of text) {
        if (char === '\r' || char === '\n' || char === '\u0004') return finish(line);
        if (char === '\u0003') return finish(''); // Ctrl-C: give up without a hash
        if (char === '\u007f' || char === '\b') line = line.slice(0, -1);
        else line += char;
      }
    };
    stdin.on('data', onData);
    stdin.resume();
  });
}
