import { randomUUID } from 'node:crypto';
import type { Response } from 'express';
import type { BackgroundResponseStore, ResponseBodyText, ResponseStore, TakenOverRun } from '../../runtime/ports.js';
import { isServiceError, ServiceError } from '../../runtime/service-error.js';
import type { Supervisor, TurnHandlers, TurnOutcome, TurnRequest } from '../../runtime/sessions/supervisor.js';
import { RUN_STOPPED, type BackgroundRuns } from '../../runtime/responses/background-runs.js';
import { toServiceError } from '../http/error-handler.js';
import { ResponseEventLog } from '../../runtime/responses/response-event-log.js';
import { isFinalStatus } from '../../runtime/responses/response-status.js';
import { streamStoredResponse } from './stored-response-stream.js';
import { bodyTextOf, newItemId, responseBody, type ResponseFrame } from './responses-format.js';
import { sendJsonText } from '../http/json-answer.js';
import { responseNotFound, type Continuation } from './responses-history.js';
import { inputItemRecords, type ResponsesRequest } from './responses-request.js';
import { ResponseEventStream } from './responses-stream.js';
import type { UsageLimiter } from '../http/usage-limits.js';

/** What background responses need. */
export type BackgroundResponseDeps = {
  supervisor: Supervisor;
  responses: ResponseStore;
  background: BackgroundResponseStore;
  runs: BackgroundRuns;
  limiter: UsageLimiter;
  onError: (error: Error) => void;
};

/** One background response as its route hands it over. */
export type BackgroundRequest = {
  request: ResponsesRequest;
  /** The request's body as the client sent it (JSON text): stored, for a process that takes the response over. */
  requestText: string;
  userId: string;
  frame: ResponseFrame;
  continuation: Continuation | undefined;
  /** The session turn of the response, from a continuation. */
  turnOf: (continuation: Continuation | undefined) => TurnRequest;
  /** Resolves the continuation again, when another turn continued the same response first. */
  resolveAgain: () => Promise<Continuation | undefined>;
};

/** How often a cancel asked on another process checks whether the response ended. */
const CANCEL_POLL_MS = 100;

/** The message of a background response the service stopped before it ended. */
const RUN_STOPPED_MESSAGE = 'the service stopped before this response finished';

/**
 * Starts a background response (`background: true`): stores it `queued` with its first events
 * and its run, answers at once (the queued response, or, with `stream`, its events as they are
 * stored, read as any later reader reads them), and runs its turn in this process whether or
 * not the client stays. It ends `completed`, `failed` or `cancelled`, never stays running.
 */
export async function startBackgroundResponse(deps: BackgroundResponseDeps, background: BackgroundRequest, res: Response): Promise<void> {
  const { queued, queuedText, sessionId } = await beginBackgroundResponse(deps, background);
  // The session is known from the start (a background turn never forks: it names its session).
  res.set('X-Session-ID', sessionId);
  if (background.request.stream) await streamStoredResponse(deps, background.frame.id, queued, -1, res);
  else sendJsonText(res, queuedText.json);
}

/** A background response as it was stored when it started: `queued`, in its session. */
export type BegunResponse = { queued: Record<string, unknown>; queuedText: ResponseBodyText; sessionId: string };

/**
 * Stores a background response `queued` with its first events and its run, and starts its turn
 * in this process (see `startBackgroundResponse`, and the A2A tasks, which are such responses).
 */
export async function beginBackgroundResponse(deps: BackgroundResponseDeps, background: BackgroundRequest): Promise<BegunResponse> {
  const { request, userId, frame, continuation } = background;
  if (request.store === false) {
    throw new ServiceError('INVALID_REQUEST', 'a background response is stored: store cannot be false with background', { param: 'store' });
  }
  if (deps.runs.isStopping) throw new ServiceError('SESSION_BUSY', 'the service is stopping: background responses are not accepted', { headers: { 'Retry-After': '1' } });
  // The turn's slot of the user's concurrent requests is held until the turn ends, not the connection.
  const release = await deps.limiter.admit(userId);
  // The session is named now, so the stored response has it from the start.
  const sessionId = continuation?.sessionHint ?? randomUUID();
  const queued = responseBody(frame, { status: 'queued', output: [] });
  const queuedText = bodyTextOf(queued);
  let events: ResponseEventStream | undefined;
  const log = eventLogOf(deps, frame.id, () => events);
  events = new ResponseEventStream(log, frame);
  events.queued();
  const record = {
    id: frame.id,
    userId,
    sessionId,
    previousResponseId: continuation?.previousResponseId ?? null,
    historyHash: continuation?.continuesAt ?? '',
    body: queuedText,
    input: inputItemRecords(request, newItemId),
  };
  try {
    await log.begin(record, deps.runs.runner, deps.runs.leaseMs, background.requestText);
  } catch (error) {
    release();
    throw error;
  }
  const stream = events;
  deps.runs.run(frame.id, (signal) => runInBackground(deps, background, sessionId, stream, log, signal).finally(release));
  return { queued, queuedText, sessionId };
}

/**
 * Continues here a background response taken over from a process that stopped (`run`): its
 * events after its last stored step are dropped (that step is shown again), its stream goes on
 * from those kept, and its turn is sent again, so it continues from its stored steps (a
 * finished tool call is not run again, one that may have started only if it may run twice).
 */
export function resumeBackgroundResponse(deps: BackgroundResponseDeps, background: BackgroundRequest, run: TakenOverRun): void {
  deps.runs.run(run.id, async (signal) => {
    const { events: shown, nextSequence } = await deps.background.rewind(run.id, run.shownThrough);
    let events: ResponseEventStream | undefined;
    const log = eventLogOf(deps, run.id, () => events);
    events = ResponseEventStream.restored(log, background.frame, shown, nextSequence);
    await runInBackground(deps, background, run.sessionId, events, log, signal, true);
  });
}

/** The stored event log of a background response, storing with each batch the response as its stream stands. */
function eventLogOf(deps: BackgroundResponseDeps, responseId: string, stream: () => ResponseEventStream | undefined): ResponseEventLog {
  return new ResponseEventLog({
    store: deps.background,
    responseId,
    progress: () => {
      const events = stream();
      return events && bodyTextOf(events.partial());
    },
    onStored: () => deps.runs.eventsStored(responseId),
    onError: deps.onError,
  });
}

/**
 * Runs a background response's turn to its end and stores how it ended, with its last events.
 * Before each step of the turn is stored, the events shown so far are (see TurnJournal), so a
 * process that takes the response over knows what its readers saw; `taken` says this process
 * took it over, its stream restored, so the steps stored already are not shown again.
 */
async function runInBackground(
  deps: BackgroundResponseDeps,
  background: BackgroundRequest,
  sessionId: string,
  stream: ResponseEventStream,
  log: ResponseEventLog,
  signal: AbortSignal,
  taken = false,
): Promise<void> {
  const handlers: TurnHandlers = {
    signal,
    beforeStep: () => log.step(stream.lastSequence),
    stepsShown: taken,
    onSessionReady: () => stream.inProgress(),
    onContent: (piece) => stream.text(piece),
    onReasoning: (piece) => stream.reasoning(piece),
    onToolCallDelta: (delta) => stream.toolCall(delta),
    onToolActivity: (activity) => stream.toolActivity(activity),
  };
  const continuation = { ...(background.continuation ?? { history: [], previousResponseId: null }), sessionHint: sessionId };
  let body: ResponseBodyText;
  let ended: Pick<TurnOutcome, 'sessionId' | 'historyHash'> = { sessionId, historyHash: continuation.continuesAt ?? '' };
  try {
    const outcome = await runTurn(deps.supervisor, background, continuation, handlers);
    ended = outcome;
    if (outcome.cancelled) body = signal.reason === RUN_STOPPED ? stream.failure(RUN_STOPPED_MESSAGE) : stream.cancel();
    else body = stream.close(outcome);
  } catch (error) {
    body = stream.failure(toServiceError(error).message);
  }
  stream.end(body);
  await log.finish({ body, historyHash: ended.historyHash, sessionId: ended.sessionId });
}

/** The turn, run again once from a fresh continuation when another turn continued the same response first. */
async function runTurn(supervisor: Supervisor, background: BackgroundRequest, continuation: Continuation, handlers: TurnHandlers): Promise<TurnOutcome> {
  try {
    return await supervisor.runTurn(background.turnOf(continuation), handlers);
  } catch (error) {
    if (!isServiceError(error) || error.code !== 'SESSION_CONFLICT') throw error;
    return supervisor.runTurn(background.turnOf(await background.resolveAgain()), handlers);
  }
}

/**
 * Cancels a background response and returns it as it ended: `cancelled` with what it produced
 * until then, or as it was when it had ended already. Waits for a run on another process to
 * end (it sees the cancel at its next renewal), or to be failed once its process is found gone.
 */
export async function cancelResponse(deps: BackgroundResponseDeps, id: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  if (body.background !== true) {
    throw new ServiceError('INVALID_REQUEST', `only a response created with background: true can be cancelled; '${id}' was not`, { param: 'response_id' });
  }
  if (isFinalStatus(body.status)) return body;
  await deps.runs.cancel(id);
  const deadline = Date.now() + 2 * deps.runs.leaseMs;
  for (;;) {
    const now = await deps.responses.get(id);
    if (!now) throw responseNotFound(id);
    if (isFinalStatus(now.body.status) || Date.now() > deadline) return now.body;
    await new Promise((resolve) => setTimeout(resolve, CANCEL_POLL_MS));
  }
}
