import type { IncomingMessage } from 'node:http';
import { randomUUID } from 'node:crypto';
import express, { type Express } from 'express';
import type pg from 'pg';
import { Pool } from 'undici';

/** The table the persisted pass-through writes its turns to. */
const TURNS_TABLE = `create table if not exists passthrough_turns (
  id bigserial primary key,
  session_id text not null,
  role text not null,
  message text not null,
  created_at timestamptz not null default now()
)`;
const INSERT_TURN = 'insert into passthrough_turns (session_id, role, message) values ($1, $2, $3)';

/**
 * The baselines the service is measured against: Express 5 forwarding the bytes of a
 * non-streaming chat request to the LLM over an undici Pool and the answer's bytes back.
 * Bodies are buffered: on this machine that is cheaper than piping streams.
 *
 * Plain (no `database`), it parses nothing and stores nothing. Persisted, it is the least a
 * durable chat endpoint does: the user's last message is committed before the upstream call
 * and the reply before answering, each as one `pg` statement in autocommit (two round trips
 * and two commits a turn), under the request's `X-Session-ID`.
 */
export async function createPassthroughApp(upstreamOrigin: string, database?: pg.Pool): Promise<{ app: Express; close: () => Promise<void> }> {
  const pool = new Pool(upstreamOrigin, { connections: 256 });
  if (database) await database.query(TURNS_TABLE);
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.post('/v1/chat/completions', async (req, res) => {
    const body = await readBody(req);
    const sessionId = req.get('x-session-id') ?? randomUUID();
    if (database) await database.query(INSERT_TURN, [sessionId, 'user', lastUserText(body)]);
    const upstream = await pool.request({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { 'content-type': req.get('content-type') ?? 'application/json' },
      body,
    });
    const answer = Buffer.from(await upstream.body.arrayBuffer());
    if (database) await database.query(INSERT_TURN, [sessionId, 'assistant', replyText(answer)]);
    res.writeHead(upstream.statusCode, {
      'content-type': String(upstream.headers['content-type'] ?? 'application/json'),
      'content-length': answer.length,
      'x-session-id': sessionId,
    });
    res.end(answer);
  });
  return { app, close: () => pool.close() };
}

function lastUserText(body: Buffer): string {
  const { messages } = JSON.parse(body.toString('utf8')) as { messages: { role: string; content: string }[] };
  return messages.findLast((message) => message.role === 'user')?.content ?? '';
}

function replyText(answer: Buffer): string {
  const { choices } = JSON.parse(answer.toString('utf8')) as { choices?: { message?: { content?: string } }[] };
  return choices?.[0]?.message?.content ?? '';
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}
