import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';

/**
 * The response object of a background revalidation (stale-while-revalidate): no client waits for
 * it, so the forwarder's writes go nowhere. Its answer reaches the cache through the request's tap,
 * which takes every answer over (Fill.head returns true): the forwarder then only reads the body on,
 * and the few writes left to it (an error it could not hand to the tap) fall here.
 */
class DetachedResponse extends EventEmitter {
  destroyed = false;
  headersSent = false;
  writableNeedDrain = false;
  statusCode = 200;

  writeHead(statusCode: number): this {
    this.statusCode = statusCode;
    this.headersSent = true;
    return this;
  }
  setHeader(): this {
    return this;
  }
  write(): boolean {
    return true;
  }
  addTrailers(): void {}
  end(): this {
    this.#close();
    return this;
  }
  destroy(): this {
    this.destroyed = true;
    this.#close();
    return this;
  }
  #close(): void {
    if (this.listenerCount('close') > 0) this.emit('close');
  }
}

export function detachedResponse(): ServerResponse {
  return new DetachedResponse() as unknown as ServerResponse;
}
