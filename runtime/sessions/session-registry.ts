import { createStore } from '@xstate/store';

/** The announced agent status: `waiting_for_input` in a user state, otherwise `processing`. */
export type AgentStatus = 'waiting_for_input' | 'processing';

/** What the runtime knows of a live (cached) session. */
export type LiveSession = {
  sessionId: string;
  userId: string;
  state: string;
  status: AgentStatus;
  transitions: number;
  lastActive: number;
};

/**
 * The supervisor's registry of live sessions and their status, read by the inspector,
 * metrics and agent endpoints. The map is updated in place (it can hold hundreds of
 * thousands of sessions); `version` changes on every update so subscribers notice.
 */
export function createSessionRegistry() {
  return createStore({
    context: { sessions: new Map<string, LiveSession>(), version: 0 },
    on: {
      upsert: (context, event: { session: LiveSession }) => {
        context.sessions.set(event.session.sessionId, event.session);
        return { sessions: context.sessions, version: context.version + 1 };
      },
      remove: (context, event: { sessionId: string }) => {
        if (!context.sessions.delete(event.sessionId)) return context;
        return { sessions: context.sessions, version: context.version + 1 };
      },
    },
  });
}

/** The registry's type. */
export type SessionRegistry = ReturnType<typeof createSessionRegistry>;
