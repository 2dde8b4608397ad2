import { randomBytes } from 'node:crypto';
import type { Usage } from '../runtime/chat-types.js';
import type { TurnOutcome } from '../runtime/sessions/supervisor.js';
import type { ResponsesRequest } from './responses-request.js';

/** An id of the Responses API: its prefix (`resp`, `msg`, `fc`) and 48 random hexadecimal characters. */
export function newItemId(prefix: string): string {
  return `${prefix}_${randomBytes(24).toString('hex')}`;
}

/** Output items of a finished turn: the assistant message, then the calls of the client's tools. */
export function outputItems(outcome: TurnOutcome): Array<Record<string, unknown>> {
  const items: Array<Record<string, unknown>> = [];
  if (outcome.content !== '' || outcome.toolCalls.length === 0) {
    items.push({
      id: newItemId('msg'),
      type: 'message',
      status: 'completed',
      role: 'assistant',
      content: [{ type: 'output_text', text: outcome.content, annotations: [], logprobs: [] }],
    });
  }
  for (const call of outcome.toolCalls) {
    items.push({ id: newItemId('fc'), type: 'function_call', status: 'completed', call_id: call.id, name: call.function.name, arguments: call.function.arguments });
  }
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
