import { createHash } from 'node:crypto';
import type { ChatMessage, ToolCall } from '../chat-types.js';

/** The roles the specification lets into a context. */
const CONTEXT_ROLES = new Set(['system', 'user', 'assistant']);

/**
 * The stored role of an explicit answer to an approval request (`{approval_request_id, approve,
 * reason?}` as JSON): kept in the transcript and, like every role but system, user and
 * assistant, never placed in a context.
 */
export const APPROVAL_ROLE = 'approval';

/** A message reduced to what is stored and hashed: its role and its text. */
export type Turn = { role: string; content: string };

/** The text of a message; text parts are joined, other parts are left out. */
export function textOf(message: ChatMessage): string {
  const content = (message as { content?: unknown }).content;
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part: { type?: string; text?: string }) => (part.type === 'text' && typeof part.text === 'string' ? part.text : ''))
    .join('');
}

/**
 * Keeps only the turns the specification lets into a context: system, user and assistant;
 * and, when the client runs its own tools, its tool results.
 */
export function contextMessages(messages: ChatMessage[], options: { withTools?: boolean } = {}): ChatMessage[] {
  return messages.filter((message) => CONTEXT_ROLES.has(message.role) || (options.withTools === true && message.role === 'tool'));
}

/**
 * How a client sent its conversation. Clients such as Open WebUI resend the whole history;
 * others send only the new message. `prefix` is everything up to and including the last
 * assistant turn (empty when only new messages were sent); `tail` is what is new.
 */
export type ClientConversation = {
  system: ChatMessage[];
  prefix: ChatMessage[];
  tail: ChatMessage[];
};

/** Splits a request's messages into the client's system turns, the resent history and the new turns. */
export function splitConversation(messages: ChatMessage[], options: { withTools?: boolean } = {}): ClientConversation {
  const kept = contextMessages(messages, options);
  const system = kept.filter((message) => message.role === 'system');
  const dialogue = kept.filter((message) => message.role !== 'system');
  const lastAssistant = dialogue.map((message) => message.role).lastIndexOf('assistant');
  return {
    system,
    prefix: dialogue.slice(0, lastAssistant + 1),
    tail: dialogue.slice(lastAssistant + 1),
  };
}

/** The hash of an empty conversation. */
export const EMPTY_HISTORY_HASH = createHash('sha256').update('svc-agent/history/v1').digest('hex');

/**
 * Folds turns into a conversation hash, one turn at a time, so that the hash of a stored
 * transcript and of the same history resent by a client agree. Whitespace at the ends of a
 * turn is ignored: some clients trim replies.
 */
export function foldHistoryHash(previous: string, turns: Turn[]): string {
  let hash = previous;
  for (const turn of turns) {
    if (turn.role !== 'user' && turn.role !== 'assistant') continue;
    hash = createHash('sha256').update(hash).update('\u0000').update(turn.role).update('\u0000').update(turn.content.trim()).digest('hex');
  }
  return hash;
}

/** The hash of a whole conversation. */
export function historyHashOf(messages: ChatMessage[]): string {
  return foldHistoryHash(EMPTY_HISTORY_HASH, messages.map(toTurn));
}

/** A message as a stored turn; a tool result keeps the call it answers. */
export function toTurn(message: ChatMessage): Turn {
  if (message.role === 'tool') {
    return { role: 'tool', content: JSON.stringify({ tool_call_id: message.tool_call_id, content: textOf(message) }) };
  }
  return { role: message.role, content: textOf(message) };
}

/** A tool call as a stored `tool_call` turn: its id, name and arguments as JSON. */
export function toolCallTurn(call: ToolCall): Turn {
  return { role: 'tool_call', content: JSON.stringify({ id: call.id, name: call.function.name, arguments: call.function.arguments }) };
}

/** The call a `tool_call` turn's content stores (see `toolCallTurn`); undefined for anything else. */
export function storedToolCall(content: string): ToolCall | undefined {
  try {
    const { id, name, arguments: args } = JSON.parse(content) as { id?: unknown; name?: unknown; arguments?: unknown };
    if (typeof id !== 'string' || typeof name !== 'string' || typeof args !== 'string') return undefined;
    return { id, type: 'function', function: { name, arguments: args } };
  } catch {
    return undefined;
  }
}
