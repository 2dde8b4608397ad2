import { Supervisor, type TurnHandlers, type TurnOutcome, type TurnRequest } from '../../runtime/sessions/supervisor.js';
import { noteRequestIds, releaseSession } from './request-context.js';
import { requestSpanOf } from './request-tracing.js';

/**
 * The supervisor as the gateway runs it: a turn records its user, then its session once it is
 * known, on the context of the request it runs for (`requestId`), so the request's line and
 * every line about the session while the turn runs carry them (chat completions, the
 * Responses API and its background runs alike). With tracing on, the turn's span is a child of
 * the request's.
 */
export class RequestSupervisor extends Supervisor {
  override async runTurn(request: TurnRequest, handlers: TurnHandlers): Promise<TurnOutcome> {
    const { requestId } = request;
    noteRequestIds(requestId, { userId: request.userId });
    // Tracing on: the turn's span is a child of its request's.
    const traceParent = requestSpanOf(requestId);
    if (traceParent) request = { ...request, traceParent };
    let sessionId: string | undefined;
    const { onSessionReady } = handlers;
    try {
      return await super.runTurn(request, {
        ...handlers,
        onSessionReady: (ready) => {
          sessionId = ready;
          noteRequestIds(requestId, { sessionId: ready });
          onSessionReady?.(ready);
        },
      });
    } finally {
      if (sessionId !== undefined) releaseSession(sessionId, requestId);
    }
  }
}
