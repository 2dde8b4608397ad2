import { Router, type Request, type Response } from 'express';
import type { EventBus } from '../../runtime/observability/event-bus.js';
import type { SessionRecord } from '../../runtime/ports.js';
import { EMPTY_HISTORY_HASH, foldHistoryHash } from '../../runtime/sessions/conversation-history.js';
import { userOf } from '../http/acting-user.js';
import { conversationItem, conversationObject } from './conversation-format.js';
import { conversationNotFound, liveConversation } from './conversation-lookup.js';
import { parseConversationCreation, parseConversationUpdate, parseItemsQuery, startingTurns } from './conversation-request.js';
import { newItemId } from '../responses/responses-format.js';
import { deleteSession, type SessionDeletionDeps } from '../../runtime/sessions/session-deletion.js';
import { checkIdentifier } from '../http/text-rules.js';

/** What the Conversations API routes need. */
export type ConversationsRouterDeps = SessionDeletionDeps & {
  /** Told of a conversation created with items: its first turn does not start the session. */
  events: EventBus;
  /** `memory.user_id`: the user of a request that names none. */
  defaultUserId: string;
};

/**
 * OpenAI's Conversations API (`/v1/conversations`) over the service's sessions: a conversation
 * is a session, its id the session's, its items the session's conversation records. Any live
 * session of the acting user is one, whichever API made it.
 */
export function createConversationsRouter(deps: ConversationsRouterDeps): Router {
  const router = Router();

  router.post('/v1/conversations', async (req, res) => {
    const creation = parseConversationCreation(req.body);
    const userId = userOf(req, res, deps.defaultUserId);
    const turns = startingTurns(creation.items);
    const session = await deps.sessions.create({
      sessionId: newItemId('conv'),
      userId,
      metadata: creation.metadata,
      // The next turn naming the session continues after its starting items.
      historyHash: turns.length > 0 ? foldHistoryHash(EMPTY_HISTORY_HASH, turns) : null,
      records: turns.map((turn) => ({ role: turn.role, message: turn.content })),
    });
    // Without items the first turn starts the session and says so, as for any new session.
    if (turns.length > 0) deps.events.emit('session:created', { sessionId: session.sessionId, userId });
    res.json(conversationObject(session));
  });

  router.get('/v1/conversations/:conversation_id', async (req, res) => {
    res.json(conversationObject(await ownConversation(deps, req, res)));
  });

  router.post('/v1/conversations/:conversation_id', async (req, res) => {
    const metadata = parseConversationUpdate(req.body);
    const id = conversationIdOf(req);
    const updated = await deps.sessions.updateMetadata(id, userOf(req, res, deps.defaultUserId), metadata);
    if (!updated) throw conversationNotFound(id);
    res.json(conversationObject(updated));
  });

  router.delete('/v1/conversations/:conversation_id', async (req, res) => {
    const { sessionId } = await ownConversation(deps, req, res);
    const deletion = await deleteSession(deps, sessionId);
    // A concurrent deletion got there first: for this request it was gone already.
    if (!deletion || deletion.wasDeleted) throw conversationNotFound(sessionId);
    res.json({ id: sessionId, object: 'conversation.deleted', deleted: true });
  });

  router.get('/v1/conversations/:conversation_id/items', async (req, res) => {
    const query = parseItemsQuery(req);
    const { sessionId } = await ownConversation(deps, req, res);
    // One more than asked for, only to tell whether more follow.
    const records = await deps.conversations.page(sessionId, { limit: query.limit + 1, order: query.order, ...(query.afterId !== undefined ? { afterId: query.afterId } : {}) });
    const data = records.slice(0, query.limit).map(conversationItem);
    res.json({ object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: records.length > query.limit });
  });

  return router;
}

/** The live session of the acting user named in the path; 404 when it is unknown, deleted or another user's. */
function ownConversation(deps: ConversationsRouterDeps, req: Request, res: Response): Promise<SessionRecord> {
  return liveConversation(deps.sessions, userOf(req, res, deps.defaultUserId), conversationIdOf(req));
}

function conversationIdOf(req: Request): string {
  return checkIdentifier(String(req.params.conversation_id), 'conversation_id');
}

