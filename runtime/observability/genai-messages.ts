import type { ChatMessage, ToolCall } from '../chat-types.js';
import type { LlmReply } from '../llm/llm-client.js';

/**
 * Messages in the GenAI semantic conventions' JSON form (v0.1.0: gen-ai-input-messages.json,
 * gen-ai-output-messages.json, gen-ai-system-instructions.json): a role and its parts.
 */
type Part =
  | { type: 'text'; content: string }
  | { type: 'reasoning'; content: string }
  | { type: 'tool_call'; id: string; name: string; arguments: unknown }
  | { type: 'tool_call_response'; id: string; response: string };

type GenAiMessage = { role: string; parts: Part[] };

/** The system messages of a call as `gen_ai.system_instructions`: their text parts. */
export function systemInstructionsOf(messages: ChatMessage[]): Part[] {
  return messages.filter((message) => message.role === 'system' || message.role === 'developer').map((message) => ({ type: 'text', content: textOf(message.content) }));
}

/** The rest of a call's messages as `gen_ai.input.messages` (the system ones are its instructions). */
export function inputMessagesOf(messages: ChatMessage[]): GenAiMessage[] {
  return messages.flatMap((message): GenAiMessage[] => {
    switch (message.role) {
      case 'system':
      case 'developer':
        return [];
      case 'tool':
        return [{ role: 'tool', parts: [{ type: 'tool_call_response', id: message.tool_call_id, response: textOf(message.content) }] }];
      case 'assistant': {
        const text = textOf(message.content ?? '');
        const calls = (message.tool_calls ?? []).filter((call): call is ToolCall => call.type === 'function');
        return [{ role: 'assistant', parts: [...(text !== '' ? [{ type: 'text' as const, content: text }] : []), ...calls.map(toolCallPart)] }];
      }
      default:
        return [{ role: message.role, parts: [{ type: 'text', content: textOf(message.content) }] }];
    }
  });
}

/** A reply as `gen_ai.output.messages`: its reasoning, text and tool calls, and why it ended. */
export function outputMessagesOf(reply: LlmReply): Array<GenAiMessage & { finish_reason: string }> {
  const parts: Part[] = [
    ...(reply.reasoning !== '' ? [{ type: 'reasoning' as const, content: reply.reasoning }] : []),
    ...(reply.content !== '' ? [{ type: 'text' as const, content: reply.content }] : []),
    ...reply.toolCalls.map(toolCallPart),
  ];
  return [{ role: 'assistant', parts, finish_reason: reply.finishReason }];
}

/** A tool call as a part: its arguments as the object they encode, or as sent when they are not JSON. */
function toolCallPart(call: ToolCall): Part {
  let args: unknown = call.function.arguments;
  try {
    args = JSON.parse(call.function.arguments);
  } catch {
    // kept as the model wrote them
  }
  return { type: 'tool_call', id: call.id, name: call.function.name, arguments: args };
}

/** A message's text: its string, or its text parts joined. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((part: { type?: string; text?: string }) => (part.type === 'text' && typeof part.text === 'string' ? part.text : '')).join('');
}
