import { z } from 'zod';
import type { ChatMessage, ToolDefinition } from '../../runtime/chat-types.js';
import { ServiceError } from '../../runtime/service-error.js';
import type { ApprovalAnswer } from '../../runtime/tools/tool-approvals.js';
import { functionToolsOf } from '../http/hosted-tools.js';
import { Metadata } from '../http/metadata.js';
import { MAX_ID_LENGTH } from '../http/text-rules.js';
import { parseRequestBody } from '../http/request-body.js';

/** A text part of an input message (`input_text`; `output_text` in an assistant message a client sends back). */
const TextPart = z.looseObject({ type: z.enum(['input_text', 'output_text', 'text']), text: z.string() });

const MessageItem = z.looseObject({
  type: z.literal('message').optional(),
  role: z.enum(['user', 'system', 'developer', 'assistant']),
  content: z.union([z.string(), z.array(TextPart)]),
});

const FunctionCallItem = z.looseObject({
  type: z.literal('function_call'),
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
});

const FunctionCallOutputItem = z.looseObject({
  type: z.literal('function_call_output'),
  call_id: z.string().min(1),
  output: z.union([z.string(), z.array(TextPart)]),
});

/** The client's answer to an `mcp_approval_request` of an earlier response: whether the held call may run. */
const ApprovalResponseItem = z.looseObject({
  type: z.literal('mcp_approval_response'),
  approval_request_id: z.string().min(1),
  approve: z.boolean(),
  reason: z.string().nullish(),
  id: z.string().nullish(),
});

/**
 * Items a client sends back from earlier output that hold no dialogue: the service's own tool
 * calls (`mcp_call`, `mcp_list_tools`), its approval requests, and reasoning. They are kept with
 * the input and, like the service's tool activity in the transcript, left out of the context.
 */
const ActivityItem = z.looseObject({ type: z.enum(['mcp_call', 'mcp_list_tools', 'mcp_approval_request', 'reasoning']) });

const InputItem = z.union([MessageItem, FunctionCallItem, FunctionCallOutputItem, ApprovalResponseItem, ActivityItem]);

const FunctionTool = z.object({
  type: z.literal('function'),
  name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, _ or -'),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
});

const ResponseId = z.string().min(1).max(64);

/** A conversation is a session: its id is a session id. */
const ConversationId = z.string().min(1).max(MAX_ID_LENGTH);

const ResponsesRequestSchema = z.object({
  model: z.string().min(1).default('svc-agent'),
  // The items are checked on their own (below), so that an error names the item, not the union.
  input: z.union([z.string(), z.array(z.unknown()).min(1)]),
  instructions: z.string().nullish(),
  previous_response_id: ResponseId.nullish(),
  conversation: z.union([ConversationId, z.object({ id: ConversationId })]).nullish(),
  store: z.boolean().nullish(),
  stream: z.boolean().nullish(),
  background: z.boolean().nullish(),
  // Hosted tools (web_search, local_shell, custom …) are left out: the service runs none of them.
  tools: functionToolsOf(FunctionTool).nullish(),
  tool_choice: z.union([z.enum(['auto', 'none', 'required']), z.looseObject({ type: z.string() })]).nullish(),
  max_output_tokens: z.number().int().positive().nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  metadata: Metadata.nullish(),
  user: z.string().nullish(),
});

const InputItems = z.object({ input: z.array(InputItem) });

/** A validated `POST /v1/responses` body. */
export type ResponsesRequest = Omit<z.infer<typeof ResponsesRequestSchema>, 'input'> & { input: string | InputItem[] };

/** One input item as it is stored with its response (and listed by `input_items`). */
export type InputItemRecord = Record<string, unknown> & { id: string; type: string };

/**
 * Validates a `POST /v1/responses` body. A bad field is a 400 in the OpenAI error shape whose
 * `param` names it (e.g. `input[1].role`); nothing is stored for it.
 */
export function parseResponsesRequest(body: unknown, limits: { maxMessages: number }): ResponsesRequest {
  const parsed = parseRequestBody(ResponsesRequestSchema, body);
  const input = typeof parsed.input === 'string' ? parsed.input : parseRequestBody(InputItems, { input: parsed.input }).input;
  const request: ResponsesRequest = { ...parsed, input };
  const items = typeof request.input === 'string' ? 1 : request.input.length;
  if (items > limits.maxMessages) {
    throw new ServiceError('INVALID_REQUEST', `too many input items: at most ${limits.maxMessages} are accepted`, { param: 'input' });
  }
  if (request.previous_response_id && request.conversation) {
    throw new ServiceError('INVALID_REQUEST', 'previous_response_id and conversation cannot be used together: a response continues one or the other', { param: 'conversation' });
  }
  return request;
}

/** One input item, as validated (and, with an id and status added, as stored). */
export type InputItem = z.infer<typeof InputItem>;

/** The id of the conversation a request adds to, if it names one (as an id or `{ id }`). */
export function conversationIdOf(request: ResponsesRequest): string | undefined {
  const { conversation } = request;
  return typeof conversation === 'string' ? conversation : (conversation?.id ?? undefined);
}

/** The request's input items as chat messages for the session's turn. */
export function inputMessages(request: ResponsesRequest): ChatMessage[] {
  return typeof request.input === 'string' ? [{ role: 'user', content: request.input }] : itemsAsMessages(request.input);
}

/**
 * Input items (or output items of that shape) as chat messages. As in a chat completion, an
 * assistant's text and the function calls that follow it are one assistant message, and the
 * texts of one answer split by the service's tool calls are joined again.
 */
export function itemsAsMessages(items: readonly InputItem[]): ChatMessage[] {
  const messages: ChatMessage[] = [];
  for (const item of items) {
    const last = messages.at(-1);
    if (item.type === 'function_call') {
      const call = { id: item.call_id, type: 'function' as const, function: { name: item.name, arguments: item.arguments } };
      if (last?.role === 'assistant') last.tool_calls = [...(last.tool_calls ?? []), call];
      else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
    } else if (item.type === 'function_call_output') {
      messages.push({ role: 'tool', tool_call_id: item.call_id, content: textOf(item.output) });
    } else if (item.type === undefined || item.type === 'message') {
      const text = textOf(item.content);
      if (item.role === 'assistant' && last?.role === 'assistant' && !last.tool_calls) last.content = `${typeof last.content === 'string' ? last.content : ''}${text}`;
      else messages.push({ role: item.role, content: text } as ChatMessage);
    }
  }
  return messages;
}

/**
 * The request's answers to approval requests (`mcp_approval_response` items), each naming where
 * it is, so that one the session is not waiting on is refused naming it; undefined for none.
 */
export function approvalAnswersOf(request: ResponsesRequest): ApprovalAnswer[] | undefined {
  if (typeof request.input === 'string') return undefined;
  const answers = request.input.flatMap((item, index): ApprovalAnswer[] =>
    item.type === 'mcp_approval_response'
      ? [{ requestId: item.approval_request_id, approve: item.approve, ...(item.reason ? { reason: item.reason } : {}), param: `input[${index}].approval_request_id` }]
      : [],
  );
  return answers.length > 0 ? answers : undefined;
}

/** The request's function tools in the chat completions form the turn takes. */
export function clientToolsOf(request: ResponsesRequest): ToolDefinition[] | undefined {
  if (!request.tools || request.tools.length === 0 || request.tool_choice === 'none') return undefined;
  return request.tools.map((tool) => ({
    type: 'function',
    function: {
      name: tool.name,
      ...(tool.description ? { description: tool.description } : {}),
      ...(tool.parameters ? { parameters: tool.parameters } : {}),
      ...(typeof tool.strict === 'boolean' ? { strict: tool.strict } : {}),
    },
  }));
}

/** The input items as stored and listed: each with an id and a type, text as parts. */
export function inputItemRecords(request: ResponsesRequest, newId: (prefix: string) => string): InputItemRecord[] {
  const items: InputItem[] = typeof request.input === 'string' ? [{ type: 'message', role: 'user', content: request.input }] : request.input;
  return items.map((item): InputItemRecord => {
    if (item.type === 'function_call') return { id: newId('fc'), ...item, type: 'function_call', status: 'completed' };
    if (item.type === 'function_call_output') return { id: newId('fco'), ...item, type: 'function_call_output', status: 'completed' };
    if (item.type === 'mcp_approval_response') return { ...item, id: item.id || newId('mcpa'), type: item.type, reason: item.reason ?? null };
    if (item.type !== undefined && item.type !== 'message') return { id: newId(item.type === 'reasoning' ? 'rs' : 'mcp'), ...item, type: item.type };
    const partType = item.role === 'assistant' ? 'output_text' : 'input_text';
    const content = typeof item.content === 'string' ? [{ type: partType, text: item.content }] : item.content;
    return { id: newId('msg'), type: 'message', role: item.role, content, status: 'completed' };
  });
}

function textOf(content: string | Array<{ text: string }>): string {
  return typeof content === 'string' ? content : content.map((part) => part.text).join('');
}
