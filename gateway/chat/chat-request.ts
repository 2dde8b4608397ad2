import { z } from 'zod';
import type { ChatMessage, ToolDefinition } from '../../runtime/chat-types.js';
import { ServiceError } from '../../runtime/service-error.js';
import { functionToolsOf } from '../http/hosted-tools.js';
import { checkText, isSessionId, MAX_ID_LENGTH, paramOf, SESSION_ID_RULE, textFault } from '../http/text-rules.js';

export { MAX_ID_LENGTH } from '../http/text-rules.js';

/** Deepest nesting of a chat body: a message's extra fields are kept in the session's state, whose copying recurses. */
const MAX_NESTING = 64;

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

/**
 * Validates a JSON request body against `schema`: an object, not nested too deeply, every
 * field as the schema says (its text was held to the text rules before any route ran). A bad
 * field is a 400 in the OpenAI error shape whose `param` names it.
 */
export function parseRequestBody<T>(schema: z.ZodType<T>, body: unknown): T {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ServiceError('INVALID_REQUEST', 'the request body must be a JSON object');
  }
  if (isNestedDeeperThan(body, MAX_NESTING)) {
    throw new ServiceError('INVALID_REQUEST', `the request body is nested too deeply: at most ${MAX_NESTING} levels of arrays and objects are accepted`);
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const param = paramOf(issue.path);
    throw new ServiceError('INVALID_REQUEST', `Invalid value for '${param}': ${describeIssue(issue)}`, { param });
  }
  return parsed.data;
}

/**
 * True when arrays and objects nest deeper than `limit` in a parsed JSON value. Iterative,
 * as the value may nest deeper than the stack allows.
 */
function isNestedDeeperThan(value: unknown, limit: number): boolean {
  const pending: Array<[unknown, number]> = [[value, 1]];
  while (pending.length > 0) {
    const [node, depth] = pending.pop()!;
    if (node === null || typeof node !== 'object') continue;
    if (depth > limit) return true;
    for (const child of Object.values(node)) pending.push([child, depth + 1]);
  }
  return false;
}

/** True when `value` can be a user or session id: 1 to 255 characters that keep the text rule. */
export function isValidIdentifier(value: string): boolean {
  return value.length > 0 && value.length <= MAX_ID_LENGTH && textFault(value) === null;
}

/**
 * Checks a user or session id to look up: 1 to 255 characters that keep the text rule (ids
 * from a path, query or body kept it already; a header or a route outside the API's may not).
 */
export function checkIdentifier(value: string, param: string): string {
  if (value.length === 0) throw new ServiceError('INVALID_REQUEST', `${param} must not be empty`, { param });
  checkText(value, param);
  if (value.length > MAX_ID_LENGTH) {
    throw new ServiceError('INVALID_REQUEST', `${param} must be at most ${MAX_ID_LENGTH} characters (got ${value.length})`, { param });
  }
  return value;
}

function describeIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === 'invalid_type') return `expected ${issue.expected}`;
  return issue.message;
}
