import type { Request, RequestHandler, Response } from 'express';
import type { ToolCallDelta } from '../../runtime/llm/llm-client.js';
import type { Supervisor, ToolActivity, TurnHandlers, TurnRequest } from '../../runtime/sessions/supervisor.js';
import type { ApprovalRequest } from '../../runtime/tools/tool-approvals.js';
import type { IdempotencyKeys } from '../../runtime/idempotency/idempotency-keys.js';
import { actingUser } from '../http/api-keys.js';
import { parseChatRequest, type ChatRequest } from './chat-request.js';
import { ChunkFormatter, completionBody, newCompletionId, unixNow } from './completion-format.js';
import { errorBody, toServiceError } from '../http/error-handler.js';
import { sendJsonText } from '../http/json-answer.js';
import { SseWriter } from '../http/sse-writer.js';
import type { UsageLimiter } from '../http/usage-limits.js';
import { checkIdentifier } from '../http/text-rules.js';
import { answeredByKey, answerRecorded } from '../http/idempotency-key.js';
import { isClientRetry } from '../http/client-retry.js';

/** What the chat route needs. */
export type ChatRouteDeps = {
  supervisor: Supervisor;
  /** Per-user rate and concurrency limits, applied once the request is valid. */
  limiter: UsageLimiter;
  defaults: { userId: string; llmModel: string; temperature: number; maxTokens: number };
  maxMessages: number;
  /** Requests' `Idempotency-Key`s; without, the header is not read. */
  idempotencyKeys?: IdempotencyKeys;
};

/** `POST /v1/chat/completions`: one user turn through the session's agent, as JSON or SSE. */
export function createChatRoute(deps: ChatRouteDeps): RequestHandler {
  return async (req, res) => {
    const request = parseChatRequest(req.body, { maxMessages: deps.maxMessages });
    const userId = chatUserOf(req, res, request, deps.defaults.userId);
    if (deps.idempotencyKeys && (await answeredByKey(req, res, { keys: deps.idempotencyKeys, userId, endpoint: 'chat.completions' }))) return;
    const turn = toTurnRequest(req, res, request, userId, deps.defaults);
    const signal = await admitTurn(deps.limiter, turn.userId, res);
    if (!signal) return;
    if (request.stream) await streamTurn(deps.supervisor, turn, request, res, signal);
    else await completeTurn(deps.supervisor, turn, request, res, signal);
  };
}

/**
 * Admits a user's turn under the usage limits; resolves with the signal that aborts the turn
 * when the client goes away, or undefined when it went away while waiting. The permit is held
 * until the response is over: sent, failed, or abandoned by the client. The first request of
 * an idempotency key is not aborted: its turn ends and is recorded for the key's retries, and
 * holds the permit until then.
 */
export async function admitTurn(limiter: UsageLimiter, userId: string, res: Response): Promise<AbortSignal | undefined> {
  const cancel = new AbortController();
  const recorded = answerRecorded(res);
  res.on('close', () => {
    if (!res.writableFinished && !recorded) cancel.abort();
  });
  const release = await limiter.admit(userId);
  if (cancel.signal.aborted) {
    release();
    return undefined;
  }
  if (recorded) void recorded.then(release);
  else res.once('close', release);
  return cancel.signal;
}

/** The user a chat request acts as: a key bound to a user acts as that user and may not name another. */
function chatUserOf(req: Request, res: Response, request: ChatRequest, defaultUserId: string): string {
  const named = actingUser(res, [
    { value: req.get('x-user-id'), param: 'X-User-ID' },
    { value: request.user_id ?? undefined, param: 'user_id' },
  ]);
  return checkIdentifier(named ?? defaultUserId, 'user_id');
}

/** The turn of a request, for `userId`. */
function toTurnRequest(req: Request, res: Response, request: ChatRequest, userId: string, defaults: ChatRouteDeps['defaults']): TurnRequest {
  // The header was held to the session id rule with the rest of the request (`holdToTextRules`).
  const sessionHint = req.get('x-session-id') ?? request.session_id;
  return {
    userId,
    requestId: res.locals.requestId as string | undefined,
    sessionHint,
    retried: isClientRetry(req, res),
    hasOwnResume: answerRecorded(res) !== undefined,
    messages: request.messages,
    clientTools: request.tools ?? undefined,
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
  sendJsonText(res, JSON.stringify(completionBody(id, request.model, created, outcome)));
}

async function streamTurn(supervisor: Supervisor, turn: TurnRequest, request: ChatRequest, res: Response, signal: AbortSignal) {
  const sse = new SseWriter(res);
  const chunks = new ChunkFormatter(newCompletionId(), request.model, unixNow());
  const { handlers, begin } = streamingHandlers(sse, res, signal, {
    open: () => sse.data(chunks.role()),
    content: (piece) => sse.data(chunks.content(piece)),
    reasoning: (piece) => sse.data(chunks.reasoning(piece)),
    toolCall: (delta) => sse.data(chunks.toolCall(delta)),
  });
  try {
    const outcome = await supervisor.runTurn(turn, handlers);
    if (signal.aborted) return;
    begin();
    sse.data(chunks.finish(outcome.finishReason));
    if (request.stream_options?.include_usage && outcome.usage) sse.data(chunks.usage(outcome.usage));
    sse.done();
  } catch (error) {
    if (!sse.isStarted) throw error;
    // Mid-stream, the error goes in the stream: an OpenAI error event, then the end.
    sse.data(JSON.stringify(errorBody(toServiceError(error))));
    sse.done();
  }
}

/**
 * What a streamed turn sends: its opening (once, before anything else), then its pieces (and,
 * if it shows them, the service's tool calls and the calls held for approval: without
 * `approvalRequests`, the question that asks for them is streamed as content).
 */
export type TurnStream = {
  open(): void;
  content(piece: string): void;
  /** A piece of the model's reasoning. */
  reasoning(piece: string): void;
  toolCall(delta: ToolCallDelta): void;
  toolActivity?(activity: ToolActivity): void;
  approvalRequests?(requests: ApprovalRequest[]): void;
};

/**
 * The handlers of a streamed turn (chat completions and the Responses API). The stream
 * starts with the first thing to send, so an error before it is a plain HTTP error; `begin`
 * starts it when the turn ended without sending anything.
 */
export function streamingHandlers(sse: SseWriter, res: Response, signal: AbortSignal, stream: TurnStream): { handlers: TurnHandlers; begin: () => void } {
  const begin = () => {
    if (sse.isStarted) return;
    sse.start();
    stream.open();
  };
  const handlers: TurnHandlers = {
    signal,
    onSessionReady: (sessionId) => res.set('X-Session-ID', sessionId),
    onContent: (piece) => {
      begin();
      stream.content(piece);
    },
    onReasoning: (piece) => {
      begin();
      stream.reasoning(piece);
    },
    onToolCallDelta: (delta) => {
      begin();
      stream.toolCall(delta);
    },
    onHeartbeat: () => {
      begin();
      sse.heartbeat();
    },
  };
  const { toolActivity, approvalRequests } = stream;
  if (toolActivity) {
    handlers.onToolActivity = (activity) => {
      begin();
      toolActivity.call(stream, activity);
    };
  }
  if (approvalRequests) {
    handlers.onApprovalRequests = (requests) => {
      begin();
      approvalRequests.call(stream, requests);
    };
  }
  return { handlers, begin };
}
