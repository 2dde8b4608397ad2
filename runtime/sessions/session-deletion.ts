import type { ConversationStore, SessionRecord, SessionStore, TurnStepStore, VectorMemoryStore } from '../ports.js';
import type { CallLog } from '../observability/call-log.js';
import type { Supervisor } from './supervisor.js';

/** What deleting a session touches. */
export type SessionDeletionDeps = {
  supervisor: Supervisor;
  sessions: SessionStore;
  conversations: ConversationStore;
  /** Absent when long-term memory is off. */
  memories?: VectorMemoryStore;
  /** The sessions' recorded LLM and tool calls. */
  calls: CallLog;
  /** The steps of sessions' unfinished turns. */
  steps?: TurnStepStore;
};

/** How a session's deletion went. */
export type SessionDeletion = {
  /** True when an earlier deletion had already deleted it: nothing was exported or removed this time. */
  wasDeleted: boolean;
  /** When the session was (first) deleted. */
  deletedAt: Date;
  /** Where `exportFirst` wrote the session's export, or null. */
  exportLocation: string | null;
};

/**
 * Deletes a session, as `DELETE /v1/agents/{id}` and `DELETE /v1/conversations/{id}` do: under
 * the session's lock (the turn in flight ends first), optionally exports it, then removes its
 * transcript, long-term memories, transition log and recorded calls unless `preserveMemory`, and marks it
 * deleted. Undefined when there is no such session. The caller checks it may delete it.
 */
export function deleteSession(
  deps: SessionDeletionDeps,
  sessionId: string,
  options: { preserveMemory?: boolean; exportFirst?: (session: SessionRecord) => Promise<string> } = {},
): Promise<SessionDeletion | undefined> {
  return deps.supervisor.retire(sessionId, async (): Promise<SessionDeletion | undefined> => {
    // Read again under the session's lock: the last turn, or a concurrent deletion, may have changed it.
    const session = await deps.sessions.get(sessionId);
    if (!session) return undefined;
    // Deleting again is harmless: the first deletion's time, nothing exported or removed.
    if (session.deletedAt) return { wasDeleted: true, deletedAt: session.deletedAt, exportLocation: null };
    const exportLocation = options.exportFirst ? await options.exportFirst(session) : null;
    if (!options.preserveMemory) {
      await deps.conversations.deleteSession(sessionId);
      await deps.memories?.deleteBySession(sessionId);
      await deps.sessions.deleteTransitions(sessionId);
      await deps.calls.forget(sessionId);
    }
    await deps.sessions.markDeleted(sessionId);
    // A deleted session is never continued: an unfinished turn's steps go whatever is kept.
    await deps.steps?.clear(sessionId);
    const deleted = await deps.sessions.get(sessionId);
    return { wasDeleted: false, deletedAt: deleted?.deletedAt ?? new Date(), exportLocation };
  });
}
