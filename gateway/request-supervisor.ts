import { Supervisor, type TurnHandlers, type TurnOutcome, type TurnRequest } from '../runtime/sessions/supervisor.js';
import { noteRequestIds } from './request-context.js';

/**
 * The supervisor as the gateway runs it: a turn records its user, then its session once it is
 * known, on the request's context, so the request's later log lines and its request line carry
 * them (chat completions, the Responses API and its background runs alike).
 */
export class RequestSupervisor extends Supervisor {
  override runTurn(request: TurnRequest, handlers: TurnHandlers): Promise<TurnOutcome> {
    noteRequestIds({ userId: request.userId });
    const { onSessionReady } = handlers;
    return super.runTurn(request, {
      ...handlers,
      onSessionReady: (sessionId) => {
        noteRequestIds({ sessionId });
        onSessionReady?.(sessionId);
      },
    });
  }
}
