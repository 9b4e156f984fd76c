#!/usr/bin/env -S node --max-semi-space-size=8
// First: V8 settings must be in place before anything else allocates (src/v8-flags.ts).
import './v8-flags.ts';
import { runCli } from './cli.ts';

// runCli settles only when the command is over (a running proxy settles it once shut down), so exit
// explicitly: a start that failed half-way may have left listeners or timers holding the loop open.
runCli(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`tollgate: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
