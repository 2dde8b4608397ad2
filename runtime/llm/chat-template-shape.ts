import type { ChatMessage } from '../chat-types.js';
import { renderedText } from './token-estimate.js';

/** What a model's chat template requires of a conversation, as learnt from its server (or set). */
export type TemplateRules = {
  /**
   * Roles must alternate user/assistant after one system message at the start (the templates
   * of Mistral, Gemma, Llama 2 and others raise "Conversation roles must alternate").
   */
  alternateRoles: boolean;
  /** The template has no system role (Gemma's "System role not supported"): system text leads the first user message. */
  systemRole: boolean;
};

/** Templates that take any order of roles. */
export const LENIENT_TEMPLATE: TemplateRules = { alternateRoles: false, systemRole: true };

/**
 * Puts a call's messages in a shape every chat template accepts, whatever the turns stored and
 * sent before: no empty messages; each tool result right after the assistant message that made
 * its call, in the calls' order, and a call without a result (or a result without its call)
 * left out, as no template renders either. Under `rules.alternateRoles`, the system messages
 * become one at the start and consecutive messages of one role are joined (a user message
 * leading the dialogue); without a system role, the system text leads the first user message.
 */
export function shapeForTemplate(messages: readonly ChatMessage[], rules: TemplateRules): ChatMessage[] {
  let shaped = placeToolResults(messages.filter((message, index) => !isEmpty(message, index === messages.length - 1)));
  if (rules.alternateRoles) shaped = alternate(shaped);
  if (!rules.systemRole) shaped = withoutSystemRole(shaped);
  return shaped;
}

/** An assistant message with neither text nor calls, or a user or system message without text (the last message is kept). */
function isEmpty(message: ChatMessage, isLast: boolean): boolean {
  if (message.role === 'tool') return false;
  if (message.role === 'assistant' && (message.tool_calls?.length ?? 0) > 0) return false;
  return !isLast && renderedText(message).trim() === '';
}

/** Tool results after the calls that asked for them; calls without results and results without calls left out. */
function placeToolResults(messages: readonly ChatMessage[]): ChatMessage[] {
  const results = new Map<string, ChatMessage>();
  for (const message of messages) if (message.role === 'tool') results.set(message.tool_call_id, message);
  const placed: ChatMessage[] = [];
  for (const message of messages) {
    if (message.role === 'tool') continue;
    if (message.role !== 'assistant' || !message.tool_calls?.length) {
      placed.push(message);
      continue;
    }
    const answered = message.tool_calls.filter((call) => results.has(call.id));
    if (answered.length === 0) {
      const { tool_calls: _unanswered, ...rest } = message;
      if (renderedText(rest as ChatMessage).trim() !== '') placed.push(rest as ChatMessage);
      continue;
    }
    placed.push(answered.length === message.tool_calls.length ? message : { ...message, tool_calls: answered });
    for (const call of answered) {
      placed.push(results.get(call.id)!);
      results.delete(call.id); // a result answers its call once
    }
  }
  return placed;
}

/** One system message first, then user and assistant in turn (tool results stay after their calls). */
function alternate(messages: readonly ChatMessage[]): ChatMessage[] {
  const system = messages.filter((message) => message.role === 'system').map(renderedText).filter((text) => text.trim() !== '');
  const out: ChatMessage[] = system.length > 0 ? [{ role: 'system', content: system.join('\n\n') }] : [];
  for (const message of messages) {
    if (message.role === 'system') continue;
    const last = out.at(-1);
    if (last && last.role === message.role && (message.role === 'user' || (last.role === 'assistant' && !last.tool_calls?.length))) {
      out[out.length - 1] = joined(last, message);
    } else if (message.role === 'assistant' && (!last || last.role === 'system')) {
      continue; // the dialogue opens with the user: a greeting before the first question is left out
    } else {
      out.push(message);
    }
  }
  return out;
}

/** Two messages of one role as one: their texts joined by a blank line, the second's tool calls kept. */
function joined(first: ChatMessage, second: ChatMessage): ChatMessage {
  const content = [renderedText({ ...first, tool_calls: undefined } as ChatMessage), renderedText({ ...second, tool_calls: undefined } as ChatMessage)]
    .filter((text) => text !== '')
    .join('\n\n');
  if (second.role === 'assistant') return { ...second, content };
  return { role: first.role, content } as ChatMessage;
}

/** The system text at the head of the first user message, for templates without a system role. */
function withoutSystemRole(messages: readonly ChatMessage[]): ChatMessage[] {
  const system = messages.filter((message) => message.role === 'system').map(renderedText).join('\n\n');
  const rest = messages.filter((message) => message.role !== 'system');
  if (system.trim() === '') return rest;
  const first = rest.findIndex((message) => message.role === 'user');
  if (first < 0) return [{ role: 'user', content: system }, ...rest];
  const user = rest[first]!;
  return [...rest.slice(0, first), { role: 'user', content: `${system}\n\n${renderedText(user)}` }, ...rest.slice(first + 1)];
}
