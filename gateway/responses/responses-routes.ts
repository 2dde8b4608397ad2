import { Router, type Request, type RequestHandler, type Response } from 'express';
import type { ChatMessage } from '../../runtime/chat-types.js';
import type { NewResponseRecord, ResponseBodyText, ResponseStore, SessionStore, TakenOverRun } from '../../runtime/ports.js';
import { isServiceError, ServiceError } from '../../runtime/service-error.js';
import type { Supervisor, TurnOutcome, TurnRequest } from '../../runtime/sessions/supervisor.js';
import { isFinalStatus } from '../../runtime/responses/response-status.js';
import { userOf } from '../http/acting-user.js';
import { listLimit, listOrder, singleQuery } from '../http/list-query.js';
import { admitTurn, streamingHandlers, type ChatRouteDeps } from '../chat/chat-route.js';
import { bodyTextOf, finishedResponse, newItemId, type ResponseFrame } from './responses-format.js';
import { ResponseEventStream } from './responses-stream.js';
import { SseWriter } from '../http/sse-writer.js';
import { sendJsonText } from '../http/json-answer.js';
import { toServiceError } from '../http/error-handler.js';
import { continuationFor, ownResponse, type Continuation } from './responses-history.js';
import { approvalAnswersOf, clientToolsOf, inputItemRecords, inputMessages, parseResponsesRequest, type ResponsesRequest } from './responses-request.js';
import { unixNow } from '../chat/completion-format.js';
import {
  beginBackgroundResponse,
  cancelResponse,
  resumeBackgroundResponse,
  startBackgroundResponse,
  type BackgroundRequest,
  type BackgroundResponseDeps,
  type BegunResponse,
} from './responses-background.js';
import { streamStoredResponse } from './stored-response-stream.js';
import type { UsageLimiter } from '../http/usage-limits.js';
import type { IdempotencyKeys } from '../../runtime/idempotency/idempotency-keys.js';
import { answeredByKey, answerRecorded } from '../http/idempotency-key.js';
import { isClientRetry } from '../http/client-retry.js';

/** What the Responses API routes need. */
export type ResponsesRouterDeps = BackgroundResponseDeps & {
  supervisor: Supervisor;
  responses: ResponseStore;
  sessions: SessionStore;
  limiter: UsageLimiter;
  defaults: ChatRouteDeps['defaults'];
  maxMessages: number;
  /** Requests' `Idempotency-Key`s; without, the header is not read. */
  idempotencyKeys?: IdempotencyKeys;
};

/**
 * The Responses API (`/v1/responses`): each response is a turn of a session, run by the same
 * agent as chat completions. `previous_response_id` continues the session of that response.
 * `create` (`POST /v1/responses`) is mounted on the app itself, as chat completions is, so a
 * turn passes no nested router; the other routes are `router`'s.
 */
export function createResponsesRoutes(deps: ResponsesRouterDeps): { create: RequestHandler; router: Router; startBackground: StartBackground } {
  const router = Router();
  // A background response whose process stopped is continued here from its stored request.
  deps.runs.onTakeOver((run) => void takeOver(deps, run).catch((error: Error) => deps.onError(error)));

  const create: RequestHandler = async (req, res) => {
    const request = parseResponsesRequest(req.body, { maxMessages: deps.maxMessages });
    const userId = userOf(req, res, deps.defaults.userId);
    if (deps.idempotencyKeys && (await answeredByKey(req, res, { keys: deps.idempotencyKeys, userId, endpoint: 'responses' }))) return;
    const continuation = await continuationFor(deps, userId, request);
    const frame: ResponseFrame = { id: newItemId('resp'), createdAt: unixNow(), request, store: request.store ?? true, background: request.background ?? false };
    if (request.background) {
      await startBackgroundResponse(deps, backgroundRequestOf(deps, { request, requestText: JSON.stringify(req.body), userId, frame, continuation }, originOf(req, res)), res);
      return;
    }
    const signal = await admitTurn(deps.limiter, userId, res);
    if (!signal) return;
    const turn = { deps, request, userId, frame, origin: originOf(req, res), res, signal };
    try {
      await answerTurn({ ...turn, continuation });
    } catch (error) {
      // Another turn continued the same response first (checked under the session's lock, before
      // anything was stored or sent): this one now branches from it, as an edited history does.
      if (!isServiceError(error) || error.code !== 'SESSION_CONFLICT' || res.headersSent) throw error;
      await answerTurn({ ...turn, continuation: await continuationFor(deps, userId, request) });
    }
  };

  router.get('/v1/responses/:response_id', async (req, res) => {
    const id = String(req.params.response_id);
    const userId = userOf(req, res, deps.defaults.userId);
    const stream = streamQuery(req);
    const startingAfter = startingAfterQuery(req);
    let record = await ownResponse(deps.responses, userId, id);
    // A response still running whose process stopped is taken over (or failed, past its attempts) before it is shown.
    if (!isFinalStatus(record.body.status) && (await deps.runs.settleLapsed()).includes(id)) record = await ownResponse(deps.responses, userId, id);
    if (stream) await streamStoredResponse(deps, id, record.body, startingAfter, res);
    else res.json(record.body);
  });

  router.post('/v1/responses/:response_id/cancel', async (req, res) => {
    const id = String(req.params.response_id);
    const record = await ownResponse(deps.responses, userOf(req, res, deps.defaults.userId), id);
    res.json(await cancelResponse(deps, id, record.body));
  });

  router.get('/v1/responses/:response_id/input_items', async (req, res) => {
    const record = await ownResponse(deps.responses, userOf(req, res, deps.defaults.userId), String(req.params.response_id));
    res.json(inputItemsPage(record.input, req));
  });

  router.delete('/v1/responses/:response_id', async (req, res) => {
    const id = String(req.params.response_id);
    const record = await ownResponse(deps.responses, userOf(req, res, deps.defaults.userId), id);
    // A response that ended may be its session's newest, which the process caching the session
    // continues without a read: the session is retired first (here, and on any other process
    // by taking its lease), so no process continues a deleted response from memory.
    if (isFinalStatus(record.body.status)) await deps.supervisor.retire(record.sessionId, () => deps.responses.remove(id));
    // A background response still running stops: here now, on another process at its next renewal.
    else await deps.responses.remove(id);
    res.json({ id, object: 'response', deleted: true });
  });

  const startBackground: StartBackground = async ({ body, userId, continuation, requestId }) => {
    const request = parseResponsesRequest(body, { maxMessages: deps.maxMessages });
    const frame: ResponseFrame = { id: newItemId('resp'), createdAt: unixNow(), request, store: true, background: true };
    const origin = { requestId, retried: false, hasOwnResume: false };
    const begun = await beginBackgroundResponse(deps, backgroundRequestOf(deps, { request, requestText: JSON.stringify(body), userId, frame, continuation }, origin));
    return { id: frame.id, ...begun };
  };

  return { create, router, startBackground };
}

/**
 * Starts a background response from a Responses request `body` (it must ask for `background`),
 * continuing `continuation`; for the protocols that run their tasks as background responses (A2A).
 */
export type StartBackground = (started: {
  body: Record<string, unknown>;
  userId: string;
  continuation: Continuation | undefined;
  requestId: string | undefined;
}) => Promise<BegunResponse & { id: string }>;

/** A background response as its turn runs it: the request, and how its session turn is made from a continuation. */
function backgroundRequestOf(
  deps: ResponsesRouterDeps,
  started: Pick<BackgroundRequest, 'request' | 'requestText' | 'userId' | 'frame' | 'continuation'>,
  origin: RequestOrigin,
): BackgroundRequest {
  const { request, userId } = started;
  return {
    ...started,
    // A background response whose process died is taken over as a run, not as an abandoned turn.
    turnOf: (from) => turnRequestOf(deps, request, userId, from, { ...origin, hasOwnResume: true }),
    resolveAgain: () => continuationFor(deps, userId, request),
  };
}

/**
 * Continues a background response taken over from a process that stopped: its stored request
 * parsed again, its continuation resolved again (its session has not moved on: the turn never
 * ended), its frame as it was created.
 */
async function takeOver(deps: ResponsesRouterDeps, run: TakenOverRun): Promise<void> {
  const request = parseResponsesRequest(JSON.parse(run.request), { maxMessages: deps.maxMessages });
  const createdAt = (JSON.parse(run.body) as { created_at: number }).created_at;
  const frame: ResponseFrame = { id: run.id, createdAt, request, store: true, background: true };
  const continuation = await continuationFor(deps, run.userId, request);
  // Sent again as the same request: the session's stored message is not stored twice.
  const origin = { requestId: undefined, retried: true, hasOwnResume: true };
  resumeBackgroundResponse(deps, backgroundRequestOf(deps, { request, requestText: run.request, userId: run.userId, frame, continuation }, origin), run);
}

/** One turn of the Responses API, from its continuation to its answer. */
type ResponseTurn = {
  deps: ResponsesRouterDeps;
  request: ResponsesRequest;
  userId: string;
  origin: RequestOrigin;
  frame: ResponseFrame;
  continuation: Continuation | undefined;
  res: Response;
  signal: AbortSignal;
};

/** Where a turn's request came from: its id, and whether the client says it retries an earlier attempt. */
type RequestOrigin = { requestId: string | undefined; retried: boolean; hasOwnResume: boolean };

function originOf(req: Request, res: Response): RequestOrigin {
  return { requestId: res.locals.requestId as string | undefined, retried: isClientRetry(req, res), hasOwnResume: answerRecorded(res) !== undefined };
}

/** The session turn of a response, continuing where its continuation says, with the record of its response when one is kept. */
function turnRequestOf(
  deps: ResponsesRouterDeps,
  request: ResponsesRequest,
  userId: string,
  continuation: Continuation | undefined,
  origin: RequestOrigin,
  responseRecord?: TurnRequest['responseRecord'],
  failedResponseRecord?: TurnRequest['failedResponseRecord'],
): TurnRequest {
  // The instructions go after the agent's system prompt, as a client's system message does.
  const instructions: ChatMessage[] = request.instructions ? [{ role: 'system', content: request.instructions }] : [];
  return {
    userId,
    requestId: origin.requestId,
    retried: origin.retried,
    hasOwnResume: origin.hasOwnResume,
    sessionHint: continuation?.sessionHint,
    continuesAt: continuation?.continuesAt,
    messages: [...instructions, ...(continuation?.history ?? []), ...inputMessages(request)],
    clientTools: clientToolsOf(request),
    approvals: approvalAnswersOf(request),
    params: {
      model: deps.defaults.llmModel,
      temperature: request.temperature ?? deps.defaults.temperature,
      max_tokens: request.max_output_tokens ?? deps.defaults.maxTokens,
    },
    responseRecord,
    failedResponseRecord,
  };
}

/** Runs the turn of a response and answers it, as JSON or as a stream of events. */
async function answerTurn({ deps, request, userId, frame, origin, continuation, res, signal }: ResponseTurn): Promise<void> {
  const turnOf: TurnOf = (responseRecord, failedResponseRecord) =>
    turnRequestOf(deps, request, userId, continuation, origin, responseRecord, failedResponseRecord);
  // Stored with the turn's end, before the client has it, so that it can be continued as soon as it arrives.
  const recordOf: RecordOf = (body, outcome) =>
    frame.store
      ? {
          id: frame.id,
          userId,
          sessionId: outcome.sessionId,
          previousResponseId: continuation?.previousResponseId ?? null,
          historyHash: outcome.historyHash,
          body,
          input: inputItemRecords(request, newItemId),
        }
      : undefined;
  if (request.stream) {
    await streamResponse(deps.supervisor, turnOf, frame, res, signal, recordOf);
    return;
  }
  // The response is made and serialised once, for the client and for its stored record.
  let answer: ResponseBodyText | undefined;
  const turn = turnOf((ended) => recordOf((answer = bodyTextOf(finishedResponse(frame, ended))), ended));
  const outcome = await deps.supervisor.runTurn(turn, { signal, onSessionReady: (sessionId) => res.set('X-Session-ID', sessionId) });
  if (signal.aborted) return;
  sendJsonText(res, (answer ?? bodyTextOf(finishedResponse(frame, outcome))).json);
}

/** The stored record of a turn's response (undefined with `store: false`). */
type RecordOf = (body: ResponseBodyText, outcome: TurnOutcome) => NewResponseRecord | undefined;

/** The session turn of a response, given how its record is made (and that of a failure answered as an error). */
type TurnOf = (responseRecord: NonNullable<TurnRequest['responseRecord']>, failedResponseRecord?: TurnRequest['failedResponseRecord']) => TurnRequest;

/** One streamed response: its events as the turn produces them. */
async function streamResponse(supervisor: Supervisor, turnOf: TurnOf, frame: ResponseFrame, res: Response, signal: AbortSignal, recordOf: RecordOf): Promise<void> {
  const sse = new SseWriter(res);
  const events = new ResponseEventStream(sse, frame);
  const { handlers, begin } = streamingHandlers(sse, res, signal, {
    open: () => events.begin(),
    content: (piece) => events.text(piece),
    reasoning: (piece) => events.reasoning(piece),
    toolCall: (delta) => events.toolCall(delta),
    toolActivity: (activity) => events.toolActivity(activity),
    approvalRequests: (requests) => events.approvalRequests(requests),
  });
  let body: ResponseBodyText | undefined;
  // The items are closed once the turn ended, before its end is stored; `response.completed` waits for the commit.
  const close = (outcome: TurnOutcome) => {
    begin();
    return (body ??= events.close(outcome));
  };
  // A failure answered as an error (failure mode http) before anything was sent is a plain HTTP
  // error with no response id, and nothing is kept; once the stream began, the client holds the
  // id, so the failed response is kept, and the stream ends with it as it was stored.
  let failed: ResponseBodyText | undefined;
  const failedRecordOf = (ended: TurnOutcome) => (sse.isStarted ? recordOf((failed = close(ended)), ended) : undefined);
  try {
    const outcome = await supervisor.runTurn(turnOf((ended) => recordOf(close(ended), ended), failedRecordOf), handlers);
    if (signal.aborted) return;
    events.end(close(outcome));
  } catch (error) {
    if (!sse.isStarted) throw error;
    // Mid-stream, the error goes in the stream.
    events.end(failed ?? events.failure(toServiceError(error).message));
  }
}

/** `stream` of a query: true or false (default false). */
function streamQuery(req: Request): boolean {
  const value = singleQuery(req, 'stream');
  if (value === undefined || value === 'false') return false;
  if (value === 'true') return true;
  throw new ServiceError('INVALID_REQUEST', `stream must be true or false, got '${value}'`, { param: 'stream' });
}

/**
 * `starting_after` of a query: the sequence number after which events are sent (-1 when
 * absent: from the first). Checked whether or not the events are streamed, as any parameter given.
 */
function startingAfterQuery(req: Request): number {
  const value = singleQuery(req, 'starting_after');
  if (value === undefined) return -1;
  const number = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(number)) {
    throw new ServiceError('INVALID_REQUEST', `starting_after must be a sequence number (an integer of at least 0), got '${value}'`, { param: 'starting_after' });
  }
  return number;
}

/** A page of input items as OpenAI lists them: `order` (default desc), `after` an item id, `limit` 1–100. */
function inputItemsPage(items: ReadonlyArray<Record<string, unknown>>, req: Request) {
  const limit = listLimit(req);
  const ordered = listOrder(req) === 'asc' ? [...items] : [...items].reverse();
  const after = singleQuery(req, 'after');
  let start = 0;
  if (after !== undefined) {
    const at = ordered.findIndex((item) => item.id === after);
    if (at < 0) throw new ServiceError('INVALID_REQUEST', `no input item with id '${after}' in this response`, { param: 'after' });
    start = at + 1;
  }
  const data = ordered.slice(start, start + limit);
  return { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: start + limit < ordered.length };
}
