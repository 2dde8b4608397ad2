import type { FakeMessage } from './messages.js';
import { lastUserText, textOf, toolResultsAfterLastUser } from './messages.js';
import type { ContentReply } from './reply-spec.js';

/**
 * The built-in deterministic answer: `Tool result: <tool contents>` when tool results follow the
 * last user message, otherwise `Echo: <last user message>`.
 */
export function echoReply(messages: FakeMessage[]): ContentReply {
  return toolResultReply(messages) ?? { content: `Echo: ${lastUserText(messages)}` };
}

/** `Tool result: <contents of the tool messages, one a line>` when tool results follow the last user message. */
export function toolResultReply(messages: FakeMessage[]): ContentReply | undefined {
  const results = toolResultsAfterLastUser(messages);
  if (results.length === 0) return undefined;
  return { content: `Tool result: ${results.map((message) => textOf(message.content)).join('\n')}` };
}
