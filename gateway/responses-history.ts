import type { ChatMessage } from '../runtime/chat-types.js';
import type { ResponseRecord, ResponseStore, SessionStore } from '../runtime/ports.js';
import { ServiceError } from '../runtime/service-error.js';

/** Most responses walked back to rebuild the history a branch starts from. */
const MAX_CHAIN = 1_000;

/**
 * Where a response continues from: the session of the previous response (`sessionHint`) or,
 * without one, a branch; and the history the turn resends (empty when the session's stored
 * turns are its context).
 */
export type Continuation = { previous: ResponseRecord; sessionHint?: string; history: ChatMessage[] };

/**
 * Resolves `previous_response_id` for a user. The newest response of its session continues
 * that session; an older one branches, as an edited chat history does: the turn runs on the
 * history up to that response, in a session of its own, and nothing stored is rewritten. A
 * response of another user does not exist for this one. `resendHistory` (a turn that answers
 * the client's function calls) resends the chain's history even when continuing, since the
 * stored transcript keeps a call's text but not its form, and the LLM must see the calls.
 */
export async function continuationOf(
  deps: { responses: ResponseStore; sessions: SessionStore },
  userId: string,
  previousId: string,
  options: { resendHistory: boolean },
): Promise<Continuation> {
  const previous = await ownResponse(deps.responses, userId, previousId, 'previous_response_id');
  const session = await deps.sessions.get(previous.sessionId);
  if (!session || session.deletedAt) {
    throw new ServiceError('GONE', `the session of response '${previousId}' was deleted: it cannot be continued`, { param: 'previous_response_id' });
  }
  const isNewest = session.historyHash === previous.historyHash;
  const history = !isNewest || options.resendHistory ? await historyUpTo(deps.responses, previous) : [];
  return isNewest ? { previous, sessionHint: session.sessionId, history } : { previous, history };
}

/** A user's stored response; 404 naming `param` when there is none or it is another user's. */
export async function ownResponse(responses: ResponseStore, userId: string, id: string, param?: string): Promise<ResponseRecord> {
  const record = await responses.get(id);
  if (!record || record.userId !== userId) {
    throw new ServiceError('NOT_FOUND', `Response with id '${id}' not found.`, param ? { param } : {});
  }
  return record;
}

/** The messages of a chain of responses, oldest first: each one's input, then its output. */
async function historyUpTo(responses: ResponseStore, last: ResponseRecord): Promise<ChatMessage[]> {
  const chain: ResponseRecord[] = [last];
  for (let record = last; record.previousResponseId && chain.length < MAX_CHAIN; ) {
    const earlier = await responses.get(record.previousResponseId);
    if (!earlier) break;
    chain.unshift(earlier);
    record = earlier;
  }
  return chain.flatMap((record) => [...record.input.flatMap(itemMessages), ...(record.body.output as Array<Record<string, unknown>>).flatMap(itemMessages)]);
}

/** A stored input or output item as chat messages (tool activity of the service's own tools is left out). */
function itemMessages(item: Record<string, unknown>): ChatMessage[] {
  if (item.type === 'function_call') {
    const call = { id: String(item.call_id), type: 'function' as const, function: { name: String(item.name), arguments: String(item.arguments) } };
    return [{ role: 'assistant', content: null, tool_calls: [call] }];
  }
  if (item.type === 'function_call_output') {
    return [{ role: 'tool', tool_call_id: String(item.call_id), content: typeof item.output === 'string' ? item.output : partsText(item.output) }];
  }
  if (item.type === 'message' && (item.role === 'user' || item.role === 'assistant')) {
    return [{ role: item.role, content: partsText(item.content) } as ChatMessage];
  }
  return [];
}

function partsText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((part: { text?: unknown }) => (typeof part.text === 'string' ? part.text : '')).join('');
}
