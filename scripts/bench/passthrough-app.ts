import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import express, { type Express } from 'express';
import type pg from 'pg';
import { Pool, type Dispatcher } from 'undici';

/** The table the persisted pass-through writes its turns to. */
const TURNS_TABLE = `create table if not exists passthrough_turns (
  id bigserial primary key,
  session_id text not null,
  role text not null,
  message text not null,
  created_at timestamptz not null default now()
)`;
const INSERT_TURN = 'insert into passthrough_turns (session_id, role, message) values ($1, $2, $3)';
/** The frame that ends a stream of chat completion chunks. */
const DONE_FRAME = 'data: [DONE]\n\n';

/** A stored message of a session's history. */
type Message = { role: string; content: string };
/** What the persisted pass-through stores to, and how many messages of a session's history it sends the LLM (at least 1). */
export type Persistence = { database: pg.Pool; historyTurns: number };
/** The parts of a chat request body the persisted pass-through reads. */
type ChatBody = { messages: Message[]; stream?: boolean };

/**
 * The baselines the service is measured against: Express 5 forwarding a chat request to the
 * LLM over an undici Pool (as many connections as the service's `llm.max_connections`
 * default) and the answer back. Bodies are buffered: on this machine that is cheaper than
 * piping streams.
 *
 * Plain (no `database`), it parses nothing and stores nothing, and forwards the bytes of a
 * non-streaming request and answer.
 *
 * Persisted, it is the floor of the service: the least a durable chat endpoint with memory
 * does. Under the request's `X-Session-ID` it keeps the session's last `historyTurns` (≥ 1)
 * messages in memory (the service's `memory.short_term_turns`: a stored message is a turn
 * there), and sends the LLM the client's system messages, that history and the client's
 * new message. The user's message is committed before the upstream call and the reply
 * before answering, each as one `pg` statement in autocommit (two round trips and two
 * commits a turn). A streamed answer is passed through to the client frame by frame as it
 * comes, its text assembled from the chunks, committed at the end, and only then the
 * stream's `[DONE]` sent.
 */
export async function createPassthroughApp(upstreamOrigin: string, persisted?: Persistence): Promise<{ app: Express; close: () => Promise<void> }> {
  const pool = new Pool(upstreamOrigin, { connections: 256 });
  if (persisted) await persisted.database.query(TURNS_TABLE);
  const histories = new Map<string, Message[]>();
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.post('/v1/chat/completions', async (req, res) => {
    const body = await readBody(req);
    if (!persisted) return forward(pool, req, res, body);
    const { database, historyTurns } = persisted;
    const sessionId = req.get('x-session-id') ?? randomUUID();
    const request = JSON.parse(body.toString('utf8')) as ChatBody;
    const asked = request.messages.findLast((message) => message.role === 'user') ?? { role: 'user', content: '' };
    const history = histories.get(sessionId) ?? [];
    await database.query(INSERT_TURN, [sessionId, 'user', asked.content]);
    const messages = [...request.messages.filter((message) => message.role === 'system'), ...history, asked];
    const upstream = await pool.request({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...request, messages }),
    });
    const contentType = String(upstream.headers['content-type'] ?? 'application/json');
    const remember = async (reply: string) => {
      await database.query(INSERT_TURN, [sessionId, 'assistant', reply]);
      histories.set(sessionId, [...history, asked, { role: 'assistant', content: reply }].slice(-historyTurns));
    };
    if (request.stream === true && upstream.statusCode === 200) {
      res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-cache', 'x-session-id': sessionId });
      const reply = await passStream(upstream.body, res);
      await remember(reply);
      res.end(DONE_FRAME);
      return;
    }
    const answer = Buffer.from(await upstream.body.arrayBuffer());
    if (upstream.statusCode === 200) await remember(replyText(answer));
    res.writeHead(upstream.statusCode, { 'content-type': contentType, 'content-length': answer.length, 'x-session-id': sessionId });
    res.end(answer);
  });
  return { app, close: () => pool.close() };
}

/** The plain pass-through: the request's bytes to the LLM, the answer's bytes back. */
async function forward(pool: Pool, req: express.Request, res: express.Response, body: Buffer): Promise<void> {
  const upstream = await pool.request({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { 'content-type': req.get('content-type') ?? 'application/json' },
    body,
  });
  const answer = Buffer.from(await upstream.body.arrayBuffer());
  res.writeHead(upstream.statusCode, { 'content-type': String(upstream.headers['content-type'] ?? 'application/json'), 'content-length': answer.length });
  res.end(answer);
}

/**
 * Writes the frames of an upstream stream to the client as they come (each upstream chunk's
 * complete frames in one write), all but its `[DONE]`; returns the reply's text, the content
 * of its chunks joined.
 */
async function passStream(body: Dispatcher.ResponseData['body'], res: ServerResponse): Promise<string> {
  body.setEncoding('utf8');
  const pieces: string[] = [];
  let pending = '';
  for await (const chunk of body as AsyncIterable<string>) {
    pending += chunk;
    const end = pending.lastIndexOf('\n\n');
    if (end < 0) continue;
    const frames = pending.slice(0, end + 2);
    pending = pending.slice(end + 2);
    let out = '';
    for (const frame of frames.split('\n\n')) {
      if (frame === '' || frame === 'data: [DONE]') continue;
      out += `${frame}\n\n`;
      if (frame.startsWith('data: ')) {
        const content = (JSON.parse(frame.slice(6)) as { choices?: { delta?: { content?: unknown } }[] }).choices?.[0]?.delta?.content;
        if (typeof content === 'string') pieces.push(content);
      }
    }
    if (out !== '') res.write(out);
  }
  return pieces.join('');
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
