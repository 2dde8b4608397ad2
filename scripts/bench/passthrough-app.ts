import { pipeline } from 'node:stream/promises';
import express, { type Express } from 'express';
import { Pool } from 'undici';

/** The baseline the service is measured against: Express 5 forwarding chat requests' bytes to the LLM, nothing more. */
export function createPassthroughApp(upstreamOrigin: string): { app: Express; close: () => Promise<void> } {
  const pool = new Pool(upstreamOrigin, { connections: 256 });
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.post('/v1/chat/completions', async (req, res) => {
    const length = req.get('content-length');
    const upstream = await pool.request({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { 'content-type': req.get('content-type') ?? 'application/json', ...(length ? { 'content-length': length } : {}) },
      body: req,
    });
    res.status(upstream.statusCode);
    const type = upstream.headers['content-type'];
    if (typeof type === 'string') res.set('content-type', type);
    await pipeline(upstream.body, res);
  });
  return { app, close: () => pool.close() };
}
