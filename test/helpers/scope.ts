import { after } from 'node:test';
import { refusedAddress, startTollgate, type Tollgate, type TollgateOptions } from './tollgate.ts';
import { startUpstream, type Upstream, type UpstreamOptions } from './upstream.ts';

type Stoppable = { stop?: () => Promise<unknown>; close?: () => Promise<unknown> };

export interface TestScope {
  /** Registers anything with stop() or close() to be ended after the file's tests. */
  keep<T extends Stoppable>(thing: T): T;
  upstream(options?: UpstreamOptions): Promise<Upstream>;
  tollgate(options: TollgateOptions): Promise<Tollgate>;
  /** `127.0.0.1:port` that refuses connections until the file ends (no other test can take it). */
  deadServer(): Promise<string>;
}

/**
 * What a test file starts (upstreams, proxies, held ports) and must stop: everything is ended in
 * reverse order once the file's tests are done, also when one of them failed.
 */
export function testScope(): TestScope {
  const running: Stoppable[] = [];
  after(async () => {
    for (const thing of running.reverse()) await (thing.stop?.() ?? thing.close?.());
  });
  const keep = <T extends Stoppable>(thing: T): T => {
    running.push(thing);
    return thing;
  };
  return {
    keep,
    upstream: async (options) => keep(await startUpstream(options)),
    tollgate: async (options) => keep(await startTollgate(options)),
    async deadServer() {
      const refused = await refusedAddress();
      keep({ close: () => refused.release() });
      return refused.address;
    },
  };
}
