import type { Logger } from 'winston';
import type { EventBus } from '../runtime/event-bus.js';

/** Writes the runtime's events to the log: failures with their traceback, the rest at debug. */
export function logRuntimeEvents(events: EventBus, logger: Logger): () => void {
  const unsubscribers = [
    events.on('storage:error', ({ operation, error, attempt, willRetry }) => {
      logger.error(`database error during ${operation} (attempt ${attempt}${willRetry ? ', retrying' : ''}): ${error.message}`, {
        stack: error.stack,
      });
    }),
    events.on('llm:error', ({ sessionId, message, durationMs }) => {
      logger.warn(`LLM call failed: ${message}`, { sessionId, durationMs: Math.round(durationMs) });
    }),
    events.on('session:created', ({ sessionId, userId }) => logger.debug('session created', { sessionId, userId })),
    events.on('session:state_changed', ({ sessionId, from, to, reason }) => logger.debug(`session ${from} -> ${to}`, { sessionId, reason })),
    events.on('tool:call', ({ sessionId, tool, server, durationMs, outcome }) =>
      logger.debug(`tool ${server}/${tool} ${outcome}`, { sessionId, durationMs: Math.round(durationMs) }),
    ),
  ];
  return () => unsubscribers.forEach((unsubscribe) => unsubscribe());
}
