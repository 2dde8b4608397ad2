import type { ChatMessage } from '../chat-types.js';
import { textOf } from './conversation-history.js';

/** The parts a context is assembled from. */
export type ContextParts = {
  /** The configured base system prompt. */
  systemPrompt: string;
  /** Long-term memories recalled for this turn, most relevant first. */
  memories: string[];
  /** System messages the client sent itself. */
  clientSystem: ChatMessage[];
  /** The user and assistant turns: stored recent turns or the client's resent history, then the new message. */
  dialogue: ChatMessage[];
};

/**
 * Assembles a turn's working context: the service's system prompt first, then recalled memories
 * right after it, then the client's own system messages, then the dialogue. Each LLM call adds
 * its agent state's tools and prompt to the first system message (`withStateSystem`).
 */
export function buildContext(parts: ContextParts): ChatMessage[] {
  const messages: ChatMessage[] = [{ role: 'system', content: parts.systemPrompt }];
  if (parts.memories.length > 0) {
    messages.push({ role: 'system', content: `Relevant memories from earlier conversations:\n${parts.memories.map((memory) => `- ${memory}`).join('\n')}` });
  }
  return [...messages, ...parts.clientSystem, ...parts.dialogue];
}

/**
 * The context of one LLM call in an agent state: the first system message (the service's
 * prompt) followed by `additions` (the description of the tools offered in the state, then the
 * state's own prompt), each after a blank line; empty ones are left out.
 */
export function withStateSystem(messages: ChatMessage[], additions: ReadonlyArray<string | undefined>): ChatMessage[] {
  const texts = additions.filter((text): text is string => text !== undefined && text !== '');
  if (texts.length === 0) return messages;
  const [first, ...rest] = messages;
  if (first?.role !== 'system') return [{ role: 'system', content: texts.join('\n\n') }, ...messages];
  return [{ role: 'system', content: [textOf(first), ...texts].join('\n\n') }, ...rest];
}
