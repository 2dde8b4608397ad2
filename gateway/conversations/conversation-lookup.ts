import type { SessionRecord, SessionStore } from '../../runtime/ports.js';
import { ServiceError } from '../../runtime/service-error.js';

/**
 * The live session of `userId` with this id, seen as a conversation: 404 naming `param` when
 * it is unknown, deleted or another user's (for another user it does not exist).
 */
export async function liveConversation(sessions: SessionStore, userId: string, id: string, param?: string): Promise<SessionRecord> {
  const session = await sessions.get(id);
  if (!session || session.userId !== userId || session.deletedAt) throw conversationNotFound(id, param);
  return session;
}

/** The 404 of a conversation that does not exist for the caller. */
export function conversationNotFound(id: string, param?: string): ServiceError {
  return new ServiceError('NOT_FOUND', `Conversation with id '${id}' not found.`, param ? { param } : {});
}
