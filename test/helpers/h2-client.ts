import http2 from 'node:http2';

export interface H2Response {
  status: number;
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders | null;
  body: Buffer;
  /** Whether the response was a single HEADERS frame ending the stream (gRPC "trailers-only"). */
  endedWithHeaders: boolean;
  json<T = Record<string, unknown>>(): T;
}

/** One HTTP/2 session to `origin` (http:// = h2c prior knowledge, https:// = TLS + ALPN, any cert). */
export async function connectHttp2(
  origin: string,
  servername = 'app.test',
): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(origin, { rejectUnauthorized: false, servername });
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve());
    session.once('error', reject);
  });
  session.on('error', () => {});
  return session;
}

/** One request on `session`; `body` chunks are written one by one (no content-length unless given). */
export function h2Request(
  session: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
  body: ReadonlyArray<string | Buffer> = [],
): Promise<H2Response> {
  return new Promise((resolve, reject) => {
    const stream = session.request(headers, { endStream: body.length === 0 });
    const chunks: Buffer[] = [];
    let status = 0;
    let responseHeaders: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders | null = null;
    let endedWithHeaders = false;
    stream.on('response', (h, flags) => {
      status = Number(h[':status']);
      responseHeaders = h;
      endedWithHeaders = (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0;
    });
    stream.on('trailers', (t) => {
      trailers = t;
    });
    stream.on('data', (d: Buffer) => chunks.push(d));
    stream.on('error', reject);
    stream.on('close', () => {
      if (status === 0) {
        reject(new Error(`stream closed without a response (code ${stream.rstCode})`));
        return;
      }
      const data = Buffer.concat(chunks);
      resolve({
        status,
        headers: responseHeaders,
        trailers,
        body: data,
        endedWithHeaders,
        json: <T>() => JSON.parse(data.toString('utf8')) as T,
      });
    });
    for (const chunk of body) stream.write(chunk);
    if (body.length > 0) stream.end();
  });
}
