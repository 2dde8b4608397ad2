import type { Logger } from 'winston';
import type { EventBus } from '../../runtime/observability/event-bus.js';

/**
 * Writes the runtime's events to the log: failures with their traceback, each tool call as one
 * info line (never its arguments or result), the rest at debug (when that level is on). A line
 * about a session names the session and its user.
 */
export function logRuntimeEvents(events: EventBus, logger: Logger): () => void {
  const unsubscribers = [
    events.on('storage:error', ({ operation, error, attempt, willRetry }) => {
      logger.error(`database error during ${operation} (attempt ${attempt}${willRetry ? ', retrying' : ''}): ${error.message}`, {
        stack: error.stack,
      });
    }),
    events.on('llm:error', ({ sessionId, userId, message, durationMs }) => {
      logger.warn(`LLM call failed: ${message}`, { sessionId, userId, durationMs: Math.round(durationMs) });
    }),
    events.on('tool:call', ({ sessionId, userId, server, tool, durationMs, outcome }) =>
      logger.info(`tool ${server}/${tool} ${outcome}`, { sessionId, userId, server, tool, durationMs: Math.round(durationMs), outcome }),
    ),
    events.on('oauth:refresh_failed', ({ userId, provider, reason, message }) =>
      logger.warn(`OAuth token refresh failed (${reason}): ${message}`, { userId, provider }),
    ),
    events.on('oauth:token_unreadable', ({ userId, provider, message }) =>
      logger.warn(`stored OAuth token unreadable (was oauth.token_key changed?): ${message}`, { userId, provider }),
    ),
    // A request refused for its budget is told by its request line (429); a turn stopped mid-way by this one.
    events.on('budget:exceeded', ({ userId, sessionId, budget, limit, used, refused }) => {
      if (refused === 'llm_call') logger.info(`turn stopped calling the model: ${budget} reached (${used} of ${limit} tokens)`, { sessionId: sessionId ?? undefined, userId, budget });
    }),
    events.on('oauth:connected', ({ userId, provider }) => logger.info('OAuth account connected', { userId, provider })),
    events.on('oauth:disconnected', ({ userId, provider }) => logger.info('OAuth account disconnected', { userId, provider })),
    // winston formats every entry before its transports drop those below their level, so
    // the debug lines of every turn are subscribed only when they are written.
    ...(logger.isDebugEnabled() ? debugLines(events, logger) : []),
  ];
  return () => unsubscribers.forEach((unsubscribe) => unsubscribe());
}

/** The routine events, each a debug line. */
function debugLines(events: EventBus, logger: Logger): (() => void)[] {
  return [
    events.on('session:created', ({ sessionId, userId }) => logger.debug('session created', { sessionId, userId })),
    events.on('session:state_changed', ({ sessionId, userId, from, to, reason }) => logger.debug(`session ${from} -> ${to}`, { sessionId, userId, reason })),
    events.on('oauth:refreshed', ({ userId, provider, durationMs }) =>
      logger.debug('OAuth token refreshed', { userId, provider, durationMs: Math.round(durationMs) }),
    ),
  ];
}
