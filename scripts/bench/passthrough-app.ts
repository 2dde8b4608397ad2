import type { IncomingMessage } from 'node:http';
import express, { type Express } from 'express';
import { Pool } from 'undici';

/**
 * The baseline the service is measured against: Express 5 forwarding the bytes of a
 * non-streaming chat request to the LLM over an undici Pool and the answer's bytes back,
 * parsing nothing. Bodies are buffered: on this machine that is cheaper than piping streams.
 */
export function createPassthroughApp(upstreamOrigin: string): { app: Express; close: () => Promise<void> } {
  const pool = new Pool(upstreamOrigin, { connections: 256 });
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.post('/v1/chat/completions', async (req, res) => {
    const upstream = await pool.request({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { 'content-type': req.get('content-type') ?? 'application/json' },
      body: await readBody(req),
    });
    const answer = Buffer.from(await upstream.body.arrayBuffer());
    res.writeHead(upstream.statusCode, { 'content-type': String(upstream.headers['content-type'] ?? 'application/json'), 'content-length': answer.length });
    res.end(answer);
  });
  return { app, close: () => pool.close() };
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}
