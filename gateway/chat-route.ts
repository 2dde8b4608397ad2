import type { Request, RequestHandler, Response } from 'express';
import type { Supervisor, TurnRequest } from '../runtime/supervisor.js';
import { checkIdentifier, parseChatRequest, type ChatRequest } from './chat-request.js';
import { ChunkFormatter, completionBody, newCompletionId, unixNow } from './completion-format.js';
import { toServiceError } from './error-handler.js';
import { SseWriter } from './sse-writer.js';

/** What the chat route needs. */
export type ChatRouteDeps = {
  supervisor: Supervisor;
  defaults: { userId: string; llmModel: string; temperature: number; maxTokens: number };
  maxMessages: number;
};

/** `POST /v1/chat/completions`: one user turn through the session's agent, as JSON or SSE. */
export function createChatRoute(deps: ChatRouteDeps): RequestHandler {
  return async (req, res) => {
    const request = parseChatRequest(req.body, { maxMessages: deps.maxMessages });
    const turn = toTurnRequest(req, request, deps.defaults);
    const cancel = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) cancel.abort();
    });
    if (request.stream) await streamTurn(deps.supervisor, turn, request, res, cancel.signal);
    else await completeTurn(deps.supervisor, turn, request, res, cancel.signal);
  };
}

function toTurnRequest(req: Request, request: ChatRequest, defaults: ChatRouteDeps['defaults']): TurnRequest {
  const userId = checkIdentifier(req.get('x-user-id') ?? request.user_id ?? defaults.userId, 'user_id');
  const sessionHeader = req.get('x-session-id');
  const sessionHint = sessionHeader !== undefined ? checkIdentifier(sessionHeader, 'session_id') : request.session_id;
  return {
    userId,
    sessionHint,
    messages: request.messages,
    params: {
      model: defaults.llmModel,
      temperature: request.temperature ?? defaults.temperature,
      max_tokens: request.max_tokens ?? request.max_completion_tokens ?? defaults.maxTokens,
    },
  };
}

async function completeTurn(supervisor: Supervisor, turn: TurnRequest, request: ChatRequest, res: Response, signal: AbortSignal) {
  const id = newCompletionId();
  const created = unixNow();
  const outcome = await supervisor.runTurn(turn, {
    signal,
    onSessionReady: (sessionId) => res.set('X-Session-ID', sessionId),
  });
  if (signal.aborted) return;
  res.json(completionBody(id, request.model, created, outcome));
}

async function streamTurn(supervisor: Supervisor, turn: TurnRequest, request: ChatRequest, res: Response, signal: AbortSignal) {
  const sse = new SseWriter(res);
  const chunks = new ChunkFormatter(newCompletionId(), request.model, unixNow());
  try {
    const outcome = await supervisor.runTurn(turn, {
      signal,
      onSessionReady: (sessionId) => {
        sse.start({ 'X-Session-ID': sessionId });
        sse.data(chunks.role());
      },
      onContent: (piece) => sse.data(chunks.content(piece)),
    });
    if (signal.aborted) return;
    sse.data(chunks.finish(outcome.finishReason));
    if (request.stream_options?.include_usage && outcome.usage) sse.data(chunks.usage(outcome.usage));
    sse.done();
  } catch (error) {
    // Before the stream starts, the error handler answers in the OpenAI error shape.
    if (!sse.isStarted) throw error;
    sse.data(chunks.content(`Error: ${toServiceError(error).message}`));
    sse.data(chunks.finish('stop'));
    sse.done();
  }
}
