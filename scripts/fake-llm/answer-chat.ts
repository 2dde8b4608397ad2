import type { ServerResponse } from 'node:http';
import type { ChatRequestBody } from './messages.js';
import type { AnswerPlan, ReplyPlan } from './reply-spec.js';
import { cutConnection, pause, sendError, sendJson } from './http-io.js';
import type { CompletionMeta, Delta } from './openai-shapes.js';
import {
  SSE_DONE,
  chunkFramer,
  completionBody,
  completionMeta,
  openingDelta,
  sseFrame,
  streamDeltas,
  usageChunkBody,
  usageOf,
} from './openai-shapes.js';

/** One chat exchange as the answer writers see it. */
export type ChatExchange = {
  res: ServerResponse;
  /** Fires when the connection closes, whoever closed it. */
  signal: AbortSignal;
  body: ChatRequestBody;
  /** The model to name in the answer. */
  model: string;
  /** Called just before the server cuts the connection on purpose, so it is not taken for a client abort. */
  onCut(): void;
};

const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' };

/** Writes the planned reply to a chat request: nothing (hang), an error, a JSON body or a stream. */
export async function answerChat(exchange: ChatExchange, plan: ReplyPlan): Promise<void> {
  if (plan.kind === 'hang') return;
  if (!(await pause(plan.delayMs, exchange.signal))) return;
  if (plan.kind === 'error') return sendError(exchange.res, plan.status, plan.message, plan.type, plan.code);
  if (exchange.body.stream === true) return streamAnswer(exchange, plan);
  return sendAnswer(exchange, plan);
}

function sendAnswer(exchange: ChatExchange, plan: AnswerPlan): void {
  const meta = completionMeta(exchange.model);
  const body = completionBody(meta, plan, usageOf(exchange.body.messages, plan));
  if (plan.cutAfterPieces === undefined) return sendJson(exchange.res, 200, body);
  const text = JSON.stringify(body);
  exchange.res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  exchange.res.write(text.slice(0, Math.floor(text.length / 2)));
  cut(exchange);
}

async function streamAnswer(exchange: ChatExchange, plan: AnswerPlan): Promise<void> {
  const { res, signal } = exchange;
  const meta = completionMeta(exchange.model);
  const withUsage = exchange.body.stream_options?.include_usage === true;
  const frame = chunkFramer(meta, withUsage);
  const send = (delta: Delta, finishReason: string | null = null): void => {
    res.write(frame(delta, finishReason));
  };
  res.writeHead(200, SSE_HEADERS);
  send(openingDelta(plan));
  const deltas = streamDeltas(plan);
  for (const [index, delta] of deltas.entries()) {
    if (index === plan.cutAfterPieces) return cut(exchange);
    if (index > 0 && !(await pause(plan.pieceDelayMs, signal))) return;
    send(delta);
  }
  // A cut at or past the last piece still keeps the stream from finishing.
  if (plan.cutAfterPieces !== undefined) return cut(exchange);
  send({}, plan.finishReason);
  finishStream(exchange, meta, plan, withUsage);
}

function finishStream(exchange: ChatExchange, meta: CompletionMeta, plan: AnswerPlan, withUsage: boolean): void {
  if (withUsage) exchange.res.write(sseFrame(usageChunkBody(meta, usageOf(exchange.body.messages, plan))));
  exchange.res.end(SSE_DONE);
}

function cut(exchange: ChatExchange): void {
  exchange.onCut();
  cutConnection(exchange.res);
}
