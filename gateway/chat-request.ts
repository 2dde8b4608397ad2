import { z } from 'zod';
import type { ChatMessage, ToolDefinition } from '../runtime/chat-types.js';
import { ServiceError } from '../runtime/service-error.js';

/** Longest user and session id: the columns are varchar(255). */
export const MAX_ID_LENGTH = 255;

/** Deepest nesting of a chat body: a message's extra fields are kept in the session's state, whose copying recurses. */
const MAX_NESTING = 64;

/** What an HTTP header value may hold (tab, printable ASCII and Latin-1). */
const HEADER_SAFE = /^[\t\x20-\x7e\x80-\xff]*$/;

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

const Identifier = z
  .string()
  .min(1)
  .max(MAX_ID_LENGTH, `must be at most ${MAX_ID_LENGTH} characters`)
  .refine((value) => !value.includes('\u0000'), 'must not contain NUL characters');

const ChatRequestSchema = z.object({
  model: z.string().min(1).default('svc-agent'),
  messages: z.array(Message).default([]),
  stream: z.boolean().default(false),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullish(),
  user_id: Identifier.optional(),
  session_id: Identifier.refine((value) => HEADER_SAFE.test(value), 'must be printable Latin-1 text: it is sent back in the X-Session-ID header').optional(),
  temperature: z.number().min(0).max(2).nullish(),
  max_tokens: z.number().int().positive().nullish(),
  max_completion_tokens: z.number().int().positive().nullish(),
  n: z.literal(1).nullish(),
  tools: z.array(FunctionTool).nullish(),
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
  // PostgreSQL text cannot hold NUL: refused here rather than failing to store.
  const withNul = request.messages.findIndex((message) => JSON.stringify(message.content ?? '').includes('\\u0000'));
  if (withNul >= 0) {
    throw new ServiceError('INVALID_REQUEST', 'message content must not contain NUL characters', { param: `messages[${withNul}].content` });
  }
  return request as ChatRequest;
}

/**
 * Validates a JSON request body against `schema`: an object, not nested too deeply, every
 * field as the schema says, and no text without a UTF-8 form. A bad field is a 400 in the
 * OpenAI error shape whose `param` names it.
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
    const param = formatPath(issue.path);
    throw new ServiceError('INVALID_REQUEST', `Invalid value for '${param}': ${describeIssue(issue)}`, { param });
  }
  // A lone surrogate has no UTF-8 form: such text cannot be stored as sent.
  const illFormed = pathOfTextMatching(body, LONE_SURROGATE);
  if (illFormed !== null) {
    throw new ServiceError('INVALID_REQUEST', `Invalid value for '${illFormed}': text must be valid Unicode, without a lone UTF-16 surrogate (such as \\ud800)`, {
      param: illFormed,
    });
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

/**
 * Refuses a body with a NUL character in any key or string (PostgreSQL text and jsonb hold
 * none), for bodies stored whole: a 400 naming where it is.
 */
export function refuseNulText(body: unknown): void {
  const withNul = pathOfTextMatching(body, /\u0000/);
  if (withNul !== null) {
    throw new ServiceError('INVALID_REQUEST', `Invalid value for '${withNul}': text must not contain NUL characters`, { param: withNul });
  }
}

/** A lone surrogate (with the `u` flag a surrogate pair is one code point, not of this category). */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * The path (e.g. `messages[1].content`) of the first key or string in a parsed JSON body
 * that `pattern` matches, or null. Iterative, like the nesting check.
 */
export function pathOfTextMatching(value: unknown, pattern: RegExp): string | null {
  const pending: Array<[unknown, PropertyKey[]]> = [[value, []]];
  while (pending.length > 0) {
    const [node, path] = pending.pop()!;
    if (typeof node === 'string') {
      if (pattern.test(node)) return formatPath(path);
      continue;
    }
    if (node === null || typeof node !== 'object') continue;
    for (const [key, child] of Object.entries(node)) {
      const childPath = [...path, Array.isArray(node) ? Number(key) : key];
      if (pattern.test(key)) return formatPath(childPath);
      pending.push([child, childPath]);
    }
  }
  return null;
}

/** True when `value` can be a user or session id: 1 to 255 characters, no NUL, no lone surrogate. */
export function isValidIdentifier(value: string): boolean {
  return value.length > 0 && value.length <= MAX_ID_LENGTH && !value.includes('\u0000') && !LONE_SURROGATE.test(value);
}

/** Checks a user or session id taken from a header. */
export function checkIdentifier(value: string, param: string): string {
  if (value.length === 0) throw new ServiceError('INVALID_REQUEST', `${param} must not be empty`, { param });
  if (value.includes('\u0000')) throw new ServiceError('INVALID_REQUEST', `${param} must not contain NUL characters`, { param });
  if (value.length > MAX_ID_LENGTH) {
    throw new ServiceError('INVALID_REQUEST', `${param} must be at most ${MAX_ID_LENGTH} characters (got ${value.length})`, { param });
  }
  return value;
}

function formatPath(path: PropertyKey[]): string {
  return path.reduce<string>((text, key) => (typeof key === 'number' ? `${text}[${key}]` : text ? `${text}.${String(key)}` : String(key)), '') || 'body';
}

function describeIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === 'invalid_type') return `expected ${issue.expected}`;
  return issue.message;
}
