import { createHash, randomBytes } from 'node:crypto';
import { toJsonText } from '../../runtime/json-text.js';
import type { ResponseBody, ResponseBodyText } from '../../runtime/ports.js';
import type { ResponseStatus } from '../../runtime/responses/response-status.js';
import type { ToolCall, Usage } from '../../runtime/chat-types.js';
import { timeDigits } from '../../runtime/sessions/session-ids.js';
import type { TurnOutcome, TurnStep } from '../../runtime/sessions/supervisor.js';
import type { ApprovalRequest } from '../../runtime/tools/tool-approvals.js';
import type { ToolCallResult } from '../../runtime/tools/tool-runner.js';
import { conversationIdOf, type ResponsesRequest } from './responses-request.js';

/** Random bytes of an id, after its time (36 hexadecimal characters). */
const ID_BYTES = 18;

/** Random bytes drawn ahead for this many ids at a time, as Node does for `randomUUID`. */
const IDS_A_DRAW = 128;

let entropy = Buffer.alloc(0);
let entropyUsed = 0;

/**
 * An id of the Responses API: its prefix (`resp`, `msg`, `fc`) and 48 hexadecimal characters,
 * the time it was made (milliseconds, 12 characters) then 36 random ones, cut from random
 * bytes drawn for many ids at once (one system call per 128 ids). An id made later sorts
 * after, as OpenAI's ids also begin with their time: a new response's key goes to the end of
 * the responses' primary key index, where random keys went to a page of the index anywhere,
 * which the database had to read back into its buffers once the index outgrew them.
 */
export function newItemId(prefix: string): string {
  if (entropyUsed === entropy.length) {
    entropy = randomBytes(ID_BYTES * IDS_A_DRAW);
    entropyUsed = 0;
  }
  const random = entropy.toString('hex', entropyUsed, entropyUsed + ID_BYTES);
  entropyUsed += ID_BYTES;
  return `${prefix}_${timeDigits()}${random}`;
}

/**
 * The id of the `mcp_call` item of a call of the service's tools in a response: made from the
 * response's id and the call's, so that a process that takes the response over and shows the
 * call again finds the item its readers were shown already.
 */
export function mcpCallItemId(responseId: string, callId: string): string {
  return `mcp_${createHash('sha256').update(responseId).update('\u0000').update(callId).digest('hex').slice(0, 48)}`;
}

/**
 * The ids of a turn's output items: its message and reasoning items' by their order, its
 * `mcp_call` items' by the call's id, and each client function call's by its index.
 */
export type OutputIds = {
  message: (index: number) => string;
  reasoning: (index: number) => string;
  mcpCall: (callId: string) => string;
  call: (index: number) => string;
};

/** Fresh ids for every output item. */
export const NEW_OUTPUT_IDS: OutputIds = {
  message: () => newItemId('msg'),
  reasoning: () => newItemId('rs'),
  mcpCall: () => newItemId('mcp'),
  call: () => newItemId('fc'),
};

/** An assistant message item with one `output_text` part. */
export function messageItem(id: string, text: string, status: 'in_progress' | 'completed') {
  return { id, type: 'message', status, role: 'assistant', content: status === 'completed' ? [outputTextPart(text)] : [] };
}

/** A `reasoning` item: the model's reasoning as one `reasoning_text` part (its text so far while in progress). */
export function reasoningItem(id: string, text: string, status: 'in_progress' | 'completed') {
  return { id, type: 'reasoning', status, summary: [], content: status === 'completed' ? [reasoningTextPart(text)] : [] };
}

/** A `reasoning_text` content part. */
export function reasoningTextPart(text: string) {
  return { type: 'reasoning_text', text };
}

/** An `output_text` content part. */
export function outputTextPart(text: string) {
  return { type: 'output_text', text, annotations: [], logprobs: [] };
}

/** A `function_call` item of a call the client runs itself. */
export function functionCallItem(id: string, call: { id: string; name: string; arguments: string }, status: 'in_progress' | 'completed') {
  return { id, type: 'function_call', status, call_id: call.id, name: call.name, arguments: call.arguments };
}

/**
 * An `mcp_call` item of a call of the service's own tools: the server's label and the
 * tool's name there (the called name and an empty label when no tool has it), and the output
 * or, when the call failed, the error. A call the user approved names its approval request.
 * A failed call's error is an `mcp_tool_execution_error` with the failure's text as its
 * content, whatever failed: the tool, its server or the connection (the result does not say
 * which, nor a protocol or HTTP status code that OpenAI's other error kinds require).
 */
export function mcpCallItem(id: string, call: ToolCall, result?: ToolCallResult, approvalRequestId?: string) {
  const source = result?.source;
  const where = { server_label: source?.server ?? '', name: source?.tool ?? call.function.name, ...(approvalRequestId ? { approval_request_id: approvalRequestId } : {}) };
  if (!result) return { id, type: 'mcp_call', status: 'in_progress', ...where, arguments: '', output: null, error: null };
  const status = result.isError ? 'failed' : 'completed';
  const error = result.isError ? { type: 'mcp_tool_execution_error', content: [{ type: 'text', text: result.content }] } : null;
  return { id, type: 'mcp_call', status, ...where, arguments: call.function.arguments, output: result.isError ? null : result.content, error };
}

/**
 * An `mcp_approval_request` item: a call of the service's tools held for the user's approval,
 * with its server's label, the tool's name there and the arguments; its id is the request's.
 */
export function approvalRequestItem(request: ApprovalRequest) {
  return { id: request.id, type: 'mcp_approval_request', server_label: request.server, name: request.tool, arguments: request.call.function.arguments };
}

/**
 * Output items of a turn, in the order it made them: a message for each LLM round's text and
 * an `mcp_call` for each call of the service's tools (`stepItems`), then the calls it held for
 * the user's approval (in place of the question the chat completions reply ends with), then
 * the calls of the client's tools. A turn with none of these still has one (empty) message.
 */
export function outputItems(outcome: Pick<TurnOutcome, 'steps' | 'toolCalls' | 'approvalRequests'>, ids: OutputIds = NEW_OUTPUT_IDS): Array<Record<string, unknown>> {
  const items = stepItems(outcome.steps, ids);
  const asks = outcome.approvalRequests.length > 0 || outcome.toolCalls.length > 0;
  if (!items.some((item) => item.type === 'message') && !asks) items.push(messageItem(ids.message(0), '', 'completed'));
  items.push(...outcome.approvalRequests.map(approvalRequestItem));
  outcome.toolCalls.forEach((call, index) => items.push(functionCallItem(ids.call(index), { id: call.id, ...call.function }, 'completed')));
  return items;
}

/**
 * The items of a turn's steps: a `reasoning` item for each round's reasoning, a message for each
 * text, an `mcp_call` for each call of the service's tools.
 */
export function stepItems(steps: readonly TurnStep[], ids: OutputIds = NEW_OUTPUT_IDS): Array<Record<string, unknown>> {
  let messages = 0;
  let reasonings = 0;
  return steps.map((step) => {
    if (step.type === 'reasoning') return reasoningItem(ids.reasoning(reasonings++), step.text, 'completed');
    if (step.type === 'text') return messageItem(ids.message(messages++), step.text, 'completed');
    return mcpCallItem(ids.mcpCall(step.call.id), step.call, step.result, step.approvalRequestId);
  });
}

/**
 * The Responses API's usage from the LLM server's token counts: its reasoning tokens when it
 * counts them; no cached or cache-write tokens are reported, so those details OpenAI's schema
 * requires are 0.
 */
export function responseUsage(usage: Usage | null) {
  if (!usage) return null;
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: usage.reasoning_tokens ?? 0 },
    total_tokens: usage.total_tokens,
  };
}

/** What a response object says of its request, whatever its status. */
export type ResponseFrame = { id: string; createdAt: number; request: ResponsesRequest; store: boolean; background?: boolean };

/**
 * A response object (`object: 'response'`) in the shape of OpenAI's schema: `usage` once the
 * turn has ended with one, `user` when the request gave one (the schema has neither nullable).
 */
export function responseBody(
  frame: ResponseFrame,
  state: {
    status: ResponseStatus;
    output: Array<Record<string, unknown>>;
    usage?: ReturnType<typeof responseUsage>;
    error?: { code: string; message: string } | null;
    incompleteDetails?: IncompleteDetails | null;
  },
) {
  const { request } = frame;
  const conversationId = conversationIdOf(request);
  return {
    id: frame.id,
    object: 'response',
    created_at: frame.createdAt,
    status: state.status,
    background: frame.background ?? false,
    error: state.error ?? null,
    incomplete_details: state.incompleteDetails ?? null,
    instructions: request.instructions ?? null,
    max_output_tokens: request.max_output_tokens ?? null,
    metadata: request.metadata ?? {},
    model: request.model,
    output: state.output,
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    previous_response_id: request.previous_response_id ?? null,
    conversation: conversationId === undefined ? null : { id: conversationId },
    reasoning: { effort: null, summary: null },
    store: frame.store,
    temperature: request.temperature ?? null,
    text: { format: { type: 'text' } },
    tool_choice: request.tool_choice ?? 'auto',
    tools: (request.tools ?? []).map((tool) => ({ type: 'function', name: tool.name, description: tool.description ?? null, parameters: tool.parameters ?? null, strict: tool.strict ?? true })),
    top_p: request.top_p ?? null,
    truncation: 'disabled',
    ...(state.usage ? { usage: state.usage } : {}),
    ...(typeof request.user === 'string' ? { user: request.user } : {}),
  };
}

/** A response object. */
export type ResponseObject = ReturnType<typeof responseBody>;

/**
 * A response object as its JSON text, serialised once for the client and for storage (which
 * keeps the text as it is), and its status. Lone surrogates are replaced by U+FFFD, as in the
 * service's other stored JSON (PostgreSQL's JSON types refuse them, and a lapsed background
 * response's failure is written into its body as jsonb): the text stored is the text sent.
 */
export function bodyTextOf(body: ResponseBody): ResponseBodyText {
  return { status: body.status, json: toJsonText(body) };
}

/** Why a response is `incomplete`, as OpenAI's schema says it. */
export type IncompleteDetails = { reason: 'max_output_tokens' | 'content_filter' };

/**
 * The response a finished turn made, with `output`: `completed`, or `incomplete` (reason
 * `max_output_tokens`) when it ended at a length limit, a reply cut short or a token budget reached.
 */
export function endedResponse(frame: ResponseFrame, outcome: TurnOutcome, output: Array<Record<string, unknown>>): ResponseObject {
  const usage = responseUsage(outcome.usage);
  if (outcome.finishReason === 'length') return responseBody(frame, { status: 'incomplete', output, usage, incompleteDetails: { reason: 'max_output_tokens' } });
  return responseBody(frame, { status: 'completed', output, usage });
}

/** The response a finished turn made: `completed` (or `incomplete`) with its output, or `failed` with what ran before the LLM failed. */
export function finishedResponse(frame: ResponseFrame, outcome: TurnOutcome): ResponseObject {
  if (outcome.failure) return responseBody(frame, { status: 'failed', output: stepItems(outcome.steps), error: { code: 'server_error', message: outcome.failure.message } });
  return endedResponse(frame, outcome, outputItems(outcome));
}
