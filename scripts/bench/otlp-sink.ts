import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A local OTLP/HTTP endpoint that takes every export and keeps nothing but counts (`--tracing`). */
export type OtlpSink = { url: string; exports: number; bytes: number; close(): Promise<void> };

/**
 * Starts the sink on 127.0.0.1: it reads each export request whole and answers an empty success,
 * as a collector that keeps up would, so the service pays for making, batching and sending its
 * spans and nothing else.
 */
export async function startOtlpSink(): Promise<OtlpSink> {
  const server = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => (sink.bytes += chunk.length));
    req.on('end', () => {
      sink.exports += 1;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const sink: OtlpSink = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    exports: 0,
    bytes: 0,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  return sink;
}
