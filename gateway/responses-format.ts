import { randomBytes } from 'node:crypto';
import type { Usage } from '../runtime/chat-types.js';
import type { TurnOutcome } from '../runtime/sessions/supervisor.js';
import type { ResponsesRequest } from './responses-request.js';

/** An id of the Responses API: its prefix (`resp`, `msg`, `fc`) and 48 random hexadecimal characters. */
export function newItemId(prefix: string): string {
  return `${prefix}_${randomBytes(24).toString('hex')}`;
}

/** The ids of a turn's output items: its message's, and each client function call's by its index. */
export type OutputIds = { message: () => string; call: (index: number) => string };

/** Fresh ids for every output item. */
export const NEW_OUTPUT_IDS: OutputIds = { message: () => newItemId('msg'), call: () => newItemId('fc') };

/** True when a turn's output has a message item: it has text, or nothing else to show. */
export function hasMessageItem(outcome: Pick<TurnOutcome, 'content' | 'toolCalls'>): boolean {
  return outcome.content !== '' || outcome.toolCalls.length === 0;
}

/** An assistant message item with one `output_text` part. */
export function messageItem(id: string, text: string, status: 'in_progress' | 'completed') {
  return { id, type: 'message', status, role: 'assistant', content: status === 'completed' ? [outputTextPart(text)] : [] };
}

/** An `output_text` content part. */
export function outputTextPart(text: string) {
  return { type: 'output_text', text, annotations: [], logprobs: [] };
}

/** A `function_call` item of a call the client runs itself. */
export function functionCallItem(id: string, call: { id: string; name: string; arguments: string }, status: 'in_progress' | 'completed') {
  return { id, type: 'function_call', status, call_id: call.id, name: call.name, arguments: call.arguments };
}

/** Output items of a finished turn: the assistant message, then the calls of the client's tools. */
export function outputItems(outcome: TurnOutcome, ids: OutputIds = NEW_OUTPUT_IDS): Array<Record<string, unknown>> {
  const items: Array<Record<string, unknown>> = [];
  if (hasMessageItem(outcome)) items.push(messageItem(ids.message(), outcome.content, 'completed'));
  outcome.toolCalls.forEach((call, index) => items.push(functionCallItem(ids.call(index), { id: call.id, ...call.function }, 'completed')));
  return items;
}

/** The Responses API's usage from the LLM server's token counts. */
export function responseUsage(usage: Usage | null) {
  if (!usage) return null;
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.total_tokens,
  };
}

/** What a response object says of its request, whatever its status. */
export type ResponseFrame = { id: string; createdAt: number; request: ResponsesRequest; store: boolean };

/** A response object (`object: 'response'`) in the shape of OpenAI's schema. */
export function responseBody(frame: ResponseFrame, state: { status: 'in_progress' | 'completed' | 'failed'; output: Array<Record<string, unknown>>; usage?: ReturnType<typeof responseUsage>; error?: { code: string; message: string } | null }) {
  const { request } = frame;
  return {
    id: frame.id,
    object: 'response',
    created_at: frame.createdAt,
    status: state.status,
    background: false,
    error: state.error ?? null,
    incomplete_details: null,
    instructions: request.instructions ?? null,
    max_output_tokens: request.max_output_tokens ?? null,
    metadata: request.metadata ?? {},
    model: request.model,
    output: state.output,
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    previous_response_id: request.previous_response_id ?? null,
    reasoning: { effort: null, summary: null },
    store: frame.store,
    temperature: request.temperature ?? null,
    text: { format: { type: 'text' } },
    tool_choice: request.tool_choice ?? 'auto',
    tools: (request.tools ?? []).map((tool) => ({ type: 'function', name: tool.name, description: tool.description ?? null, parameters: tool.parameters ?? null, strict: tool.strict ?? true })),
    top_p: request.top_p ?? null,
    truncation: 'disabled',
    usage: state.usage ?? null,
    user: request.user ?? null,
  };
}
