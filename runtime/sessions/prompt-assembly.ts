import type { ChatMessage } from '../chat-types.js';

/** The parts a context is assembled from. */
export type ContextParts = {
  /** The configured base system prompt. */
  systemPrompt: string;
  /** The tools' names, descriptions and input schemas, appended to the base prompt. */
  toolsDescription: string;
  /** Long-term memories recalled for this turn, most relevant first. */
  memories: string[];
  /** System messages the client sent itself. */
  clientSystem: ChatMessage[];
  /** The user and assistant turns: stored recent turns or the client's resent history, then the new message. */
  dialogue: ChatMessage[];
};

/**
 * Assembles the messages sent to the LLM: the service's system prompt first (with the tool
 * descriptions), then recalled memories right after it, then the client's own system
 * messages, then the dialogue.
 */
export function buildContext(parts: ContextParts): ChatMessage[] {
  const system = parts.toolsDescription ? `${parts.systemPrompt}\n\n${parts.toolsDescription}` : parts.systemPrompt;
  const messages: ChatMessage[] = [{ role: 'system', content: system }];
  if (parts.memories.length > 0) {
    messages.push({ role: 'system', content: `Relevant memories from earlier conversations:\n${parts.memories.map((memory) => `- ${memory}`).join('\n')}` });
  }
  return [...messages, ...parts.clientSystem, ...parts.dialogue];
}
