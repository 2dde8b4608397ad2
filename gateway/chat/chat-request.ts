import { z } from 'zod';
import type { ChatMessage, ToolDefinition } from '../../runtime/chat-types.js';
import { ServiceError } from '../../runtime/service-error.js';
import { functionToolsOf } from '../http/hosted-tools.js';
import { parseRequestBody } from '../http/request-body.js';
import { isSessionId, MAX_ID_LENGTH, SESSION_ID_RULE } from '../http/text-rules.js';

const TextPart = z.looseObject({ type: z.literal('text'), text: z.string() });

const Message = z.looseObject({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
  content: z.union([z.string(), z.array(z.union([TextPart, z.looseObject({ type: z.string() })])), z.null()]).optional(),
  name: z.string().optional(),
  tool_call_id: z.string().optional(),
  tool_calls: z.array(z.unknown()).optional(),
});

const FunctionTool = z.object({
  type: z.literal('function'),
  function: z.object({
    name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, _ or -'),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullish(),
  }),
});

const Identifier = z.string().min(1).max(MAX_ID_LENGTH, `must be at most ${MAX_ID_LENGTH} characters`);

const ChatRequestSchema = z.object({
  model: z.string().min(1).default('svc-agent'),
  messages: z.array(Message).default([]),
  stream: z.boolean().default(false),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullish(),
  user_id: Identifier.optional(),
  session_id: z.string().refine(isSessionId, SESSION_ID_RULE).optional(),
  temperature: z.number().min(0).max(2).nullish(),
  max_tokens: z.number().int().positive().nullish(),
  max_completion_tokens: z.number().int().positive().nullish(),
  n: z.literal(1).nullish(),
  // Tools of another type than function (custom …) are left out: the service runs none of them.
  tools: functionToolsOf(FunctionTool).nullish(),
});

/** A validated chat completion request. */
export type ChatRequest = Omit<z.infer<typeof ChatRequestSchema>, 'messages' | 'tools'> & {
  messages: ChatMessage[];
  tools?: ToolDefinition[] | null;
};

/**
 * Validates a chat completion body. A bad field is a 400 in the OpenAI error shape whose
 * `param` names it (e.g. `messages[2].role`).
 */
export function parseChatRequest(body: unknown, limits: { maxMessages: number }): ChatRequest {
  const request = parseRequestBody(ChatRequestSchema, body);
  if (request.messages.length > limits.maxMessages) {
    throw new ServiceError('INVALID_REQUEST', `too many messages: at most ${limits.maxMessages} are accepted`, { param: 'messages' });
  }
  return request as ChatRequest;
}
