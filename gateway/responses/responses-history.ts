import type { ChatMessage } from '../../runtime/chat-types.js';
import type { ResponseRecord, ResponseStore, SessionStore } from '../../runtime/ports.js';
import { ServiceError } from '../../runtime/service-error.js';
import type { Supervisor } from '../../runtime/sessions/supervisor.js';
import { liveConversation } from '../conversations/conversation-lookup.js';
import { conversationIdOf, itemsAsMessages, type InputItem, type ResponsesRequest } from './responses-request.js';

/** Most responses walked back to rebuild the history a branch starts from. */
const MAX_CHAIN = 1_000;

/**
 * Where a response continues from: a session (`sessionHint`), whose stored turns are the
 * context, or, without one, a branch with the history it resends; and the response it follows
 * (the chain a later branch rebuilds its history from).
 */
export type Continuation = {
  sessionHint?: string;
  /** The history hash the session must still be at (continuing its newest response): see `TurnRequest.continuesAt`. */
  continuesAt?: string;
  history: ChatMessage[];
  previousResponseId: string | null;
};

/** What resolving a continuation reads: the supervisor's cached sessions first, then storage. */
type ContinuationDeps = { responses: ResponseStore; sessions: SessionStore; supervisor: Pick<Supervisor, 'responseEnd'> };

/** Where a request continues from: its `previous_response_id`, its `conversation`, or nowhere (a new session). */
export function continuationFor(deps: ContinuationDeps, userId: string, request: ResponsesRequest): Promise<Continuation | undefined> {
  if (request.previous_response_id) return continuationOf(deps, userId, request.previous_response_id);
  const conversationId = conversationIdOf(request);
  if (conversationId !== undefined) return conversationContinuation(deps, userId, conversationId);
  return Promise.resolve(undefined);
}

/**
 * Resolves `previous_response_id` for a user. The newest response of its session continues
 * that session; an older one branches, as an edited chat history does: the turn runs on the
 * history up to that response, in a session of its own, and nothing stored is rewritten. A
 * response of another user does not exist for this one.
 */
export async function continuationOf(deps: ContinuationDeps, userId: string, previousId: string): Promise<Continuation> {
  // The newest response of a session cached here continues it: the turn's check under the
  // session's lock (`continuesAt`) refuses it if the session has moved on meanwhile.
  const cached = deps.supervisor.responseEnd(previousId);
  if (cached?.userId === userId) return { sessionHint: cached.sessionId, continuesAt: cached.historyHash, history: [], previousResponseId: previousId };
  const end = await deps.responses.endOf(previousId);
  if (!end || end.userId !== userId) throw responseNotFound(previousId, 'previous_response_id');
  if (end.status === 'queued' || end.status === 'in_progress') {
    throw new ServiceError('INVALID_REQUEST', `response '${previousId}' is still ${end.status}: it can be continued once it has ended`, { param: 'previous_response_id' });
  }
  if (!end.sessionLive) {
    throw new ServiceError('GONE', `the session of response '${previousId}' was deleted: it cannot be continued`, { param: 'previous_response_id' });
  }
  if (end.sessionHistoryHash === end.historyHash) return { sessionHint: end.sessionId, continuesAt: end.historyHash, history: [], previousResponseId: previousId };
  return { history: await historyUpTo(deps.responses, previousId), previousResponseId: previousId };
}

/**
 * Resolves `conversation` for a user: the turn continues that session (a conversation is a
 * session), after its newest response if its last turn was one.
 */
export async function conversationContinuation(deps: ContinuationDeps, userId: string, conversationId: string): Promise<Continuation> {
  // The sessions store answers an outage with its driver's error: here it is the 503 every Responses route answers.
  const session = await liveConversation(deps.sessions, userId, conversationId, 'conversation');
  const newest = session.historyHash === null ? undefined : await deps.responses.newestEndingAt(session.sessionId, session.historyHash);
  return { sessionHint: session.sessionId, history: [], previousResponseId: newest ?? null };
}

/** A user's stored response; 404 naming `param` when there is none or it is another user's. */
export async function ownResponse(responses: ResponseStore, userId: string, id: string, param?: string): Promise<ResponseRecord> {
  const record = await responses.get(id);
  if (!record || record.userId !== userId) throw responseNotFound(id, param);
  return record;
}

/** The 404 of a response that does not exist for the caller. */
export function responseNotFound(id: string, param?: string): ServiceError {
  return new ServiceError('NOT_FOUND', `Response with id '${id}' not found.`, param ? { param } : {});
}

/** The messages of the chain of responses ending at `lastId`, oldest first: each one's input, then its output. */
async function historyUpTo(responses: ResponseStore, lastId: string): Promise<ChatMessage[]> {
  const chain = await responses.chainTo(lastId, MAX_CHAIN);
  const items = chain.flatMap((record) => [...record.input, ...(record.body.output as Array<Record<string, unknown>>)]);
  return itemsAsMessages(items.filter(isDialogueItem));
}

/**
 * A stored item that enters the history: user and assistant messages and client function
 * calls with their outputs (system and developer messages, and the service's own tool
 * activity, stay out).
 */
function isDialogueItem(item: Record<string, unknown>): item is Record<string, unknown> & InputItem {
  if (item.type === 'message') return item.role === 'user' || item.role === 'assistant';
  return item.type === 'function_call' || item.type === 'function_call_output';
}
