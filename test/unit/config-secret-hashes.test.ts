import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sha256Hex } from '../../src/config/load.ts';
import { createLogger } from '../../src/log.ts';
import { createMainChangeNotice } from '../../src/sources/runtime-files.ts';

/**
 * main.yaml may hold the masterkey or a Redis password: a hash of its bytes in a log line lets them
 * be guessed offline by anyone who reads the logs, so the change notices name the file only.
 */
describe('no hash of a file holding secrets is logged', () => {
  it('main.yaml change notices carry no hash of its content', () => {
    const lines: string[] = [];
    const logger = createLogger('debug', { write: (line: string) => void lines.push(line) });
    const running = 'masterkey: guessable\n';
    const notice = createMainChangeNotice(logger, '/etc/tollgate/main.yaml', sha256Hex(running));
    const edited = 'masterkey: guessable-2\n';
    notice({ kind: 'content', text: edited, hash: sha256Hex(edited) });
    notice({ kind: 'content', text: running, hash: sha256Hex(running) });
    assert.equal(lines.length, 2);
    for (const line of lines) {
      assert.ok(!line.includes(sha256Hex(edited)) && !line.includes(sha256Hex(running)), line);
    }
  });
});
