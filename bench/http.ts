/**
 * One-off HTTP requests of the bench (readiness, checks, the token API). node:http rather than
 * fetch because fetch does not let a caller choose the Host header, and routing depends on it.
 */
import { request as plainRequest } from 'node:http';
import { request as tlsRequest } from 'node:https';
import type { Started } from './processes.ts';

export interface Answer {
  status: number;
  body: Buffer;
  headers: Record<string, string | string[] | undefined>;
}

export function httpRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string; timeoutMs?: number } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    // The TLS targets serve a self-signed certificate made for the run.
    const outgoing = url.startsWith('https:')
      ? tlsRequest(url, {
          method: options.method ?? 'GET',
          headers: options.headers ?? {},
          agent: false,
          rejectUnauthorized: false,
        })
      : plainRequest(url, { method: options.method ?? 'GET', headers: options.headers ?? {}, agent: false });
    outgoing.setTimeout(options.timeoutMs ?? 5000, () =>
      outgoing.destroy(new Error(`no answer from ${url} in time`)),
    );
    outgoing.on('error', reject);
    outgoing.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('error', reject);
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks), headers: response.headers }),
      );
    });
    outgoing.end(options.body);
  });
}

/** Polls `url` until it answers `expectedStatus`, failing fast if `started` exits meanwhile. */
export async function waitForHttp(url: string, started: Started, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let died = false;
  void started.exited.then(() => {
    died = true;
  });
  let lastProblem = 'no answer yet';
  while (Date.now() < deadline) {
    if (died) throw new Error(`${started.name} exited before it was ready:\n${started.output()}`);
    try {
      const { status } = await httpRequest(url, { timeoutMs: 1000 });
      if (status === 200) return;
      lastProblem = `status ${status}`;
    } catch (error) {
      lastProblem = error instanceof Error ? error.message : String(error);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${started.name} not ready at ${url} (${lastProblem}):\n${started.output()}`);
}
