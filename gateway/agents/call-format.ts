import type { CallRecord } from '../../runtime/ports.js';

/**
 * One recorded LLM or tool call, as `GET /v1/agents/{agent_id}/calls` and the inspector give
 * it: when, where in the graph, how long and how it ended, then what was sent and returned.
 */
export type CallEntry = {
  id: number;
  type: 'llm' | 'tool';
  turn_id: string;
  /** The request id of the HTTP request the call ran for, as the service's log lines carry it. */
  request_id: string | null;
  /** With tracing on, the trace the call belongs to and its own span, as a trace store (Jaeger, Tempo) finds them. */
  trace_id: string | null;
  span_id: string | null;
  state: string;
  started_at: string;
  duration_ms: number;
  outcome: 'ok' | 'error' | 'cancelled';
  error: string | null;
} & (
  | {
      type: 'llm';
      model: string;
      temperature: number | null;
      max_tokens: number | null;
      /** Exactly the messages sent, the system prompt first. */
      messages: unknown[];
      /** The names of the tools offered. */
      tools: string[];
      finish_reason: string | null;
      /** The server's counts; `estimated` when it sent none and the service counted them, `reasoning_tokens` when it counted those. */
      usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number; reasoning_tokens?: number; estimated?: boolean } | null;
      /** The model's reasoning in its reply (null when it gave none). */
      reasoning: string | null;
      /** What the service mended or made of the call for its server (see docs/llm-servers.md); empty when nothing. */
      repairs: string[];
    }
  | {
      type: 'tool';
      name: string;
      server: string | null;
      tool: string | null;
      arguments: string;
      result: string | null;
      approval_request_id: string | null;
    }
);

/** A recorded call as its API entry. */
export function callEntry(call: CallRecord): CallEntry {
  const common = {
    id: call.id,
    turn_id: call.turnId,
    request_id: call.requestId ?? null,
    trace_id: call.traceId ?? null,
    span_id: call.spanId ?? null,
    state: call.state,
    started_at: new Date(call.startedAt).toISOString(),
    duration_ms: call.durationMs,
    outcome: call.outcome,
    error: call.error,
  };
  if (call.kind === 'llm') {
    const { model, temperature, maxTokens, finishReason, usage } = call;
    const { messages, tools } = sentBody(call.request);
    const reasoning = call.reasoning ?? null;
    const repairs = call.repairs ?? [];
    return { ...common, type: 'llm', model, temperature, max_tokens: maxTokens, messages, tools, finish_reason: finishReason, usage, reasoning, repairs };
  }
  const { name, server, tool, arguments: args, result, approvalRequestId } = call;
  return { ...common, type: 'tool', name, server, tool, arguments: args, result, approval_request_id: approvalRequestId };
}

/** The messages and tool names of an LLM call's JSON body (none when it was not sent). */
function sentBody(body: string): { messages: unknown[]; tools: string[] } {
  if (body === '') return { messages: [], tools: [] };
  const sent = JSON.parse(body) as { messages?: unknown[]; tools?: Array<{ function?: { name?: string } }> };
  return { messages: sent.messages ?? [], tools: (sent.tools ?? []).flatMap((tool) => (tool.function?.name ? [tool.function.name] : [])) };
}
