/** Questions the replay server asks of a chat prompt: who spoke last, and would a strict template accept it. */
import { messageText } from '../../fixtures/llm-servers/prompt-tokens.js';
import type { ChatMessage } from '../../fixtures/llm-servers/server-fixture.js';

/** The message strict jinja templates raise (HF Llama/Mistral/Gemma style). */
export const ALTERNATION_ERROR = 'Conversation roles must alternate user/assistant/user/assistant/...';

/** The text of the last user message, or '' when there is none. */
export function lastUserText(messages: readonly ChatMessage[]): string {
  for (let index = messages.length - 1; index >= 0; index--) {
    if (messages[index]!.role === 'user') return messageText(messages[index]!);
  }
  return '';
}

/** Whether the prompt ends with tool results, i.e. the model is being asked to continue after its calls. */
export function endsWithToolResults(messages: readonly ChatMessage[]): boolean {
  return messages.at(-1)?.role === 'tool';
}

/**
 * Whether a template that insists on alternation accepts the roles: an optional first system message,
 * then user/assistant turns starting with user; tool messages only right after an assistant message
 * with tool_calls (or another tool message), after which the assistant speaks again.
 */
export function rolesAlternate(messages: readonly ChatMessage[]): boolean {
  let expected: 'user' | 'assistant' = 'user';
  let toolsAllowed = false;
  for (const [index, message] of messages.entries()) {
    const role = message.role;
    if (role === 'system' || role === 'developer') {
      if (index !== 0) return false;
      continue;
    }
    if (role === 'tool') {
      if (!toolsAllowed) return false;
      expected = 'assistant';
      continue;
    }
    if (role !== expected) return false;
    toolsAllowed = role === 'assistant' && Array.isArray(message.tool_calls) && message.tool_calls.length > 0;
    expected = role === 'user' ? 'assistant' : 'user';
  }
  return true;
}
