import type { ToolCall, Usage } from '../chat-types.js';
import type { LlmReply, LlmRequest } from '../llm/llm-client.js';
import type { CallOutcome, LlmCallRecord, SessionUsage, ToolCallRecord } from '../ports.js';
import type { ToolCallResult } from '../tools/tool-runner.js';

/**
 * Where a call was made: the session, its user, the turn, the HTTP request it ran for (as logged)
 * and the graph state; with tracing on, the trace and the call's own span (when sampled).
 */
export type CallScope = { sessionId: string; userId: string; turnId: string; requestId: string | null; state: string; traceId?: string; spanId?: string };

/** How a call ended: with its answer, or with an error (`cancelled` when its turn was). */
export type CallEnd<T> = { value: T } | { error: unknown; cancelled: boolean };

/** When a call started, by the wall clock (for the record) and the monotonic one (for its duration). */
export type CallStart = { at: Date; mark: number };

/** Marks the start of a call. */
export function startCall(): CallStart {
  return { at: new Date(), mark: performance.now() };
}

/** The record of an LLM call: exactly what was sent (`body`, its JSON), and what came back or went wrong. */
export function llmCallRecord(scope: CallScope, request: LlmRequest, body: string, start: CallStart, end: CallEnd<LlmReply>): LlmCallRecord {
  const reply = 'value' in end ? end.value : undefined;
  return {
    kind: 'llm',
    ...scope,
    ...timing(start, end),
    model: request.model,
    temperature: request.temperature ?? null,
    maxTokens: request.max_tokens ?? null,
    request: body,
    finishReason: reply?.finishReason ?? null,
    usage: reply?.usage ?? null,
    reasoning: reply?.reasoning || null,
    repairs: reply?.repairs ?? [],
  };
}

/** The record of a call of the service's tools; a result marked as an error is a failed call. */
export function toolCallRecord(scope: CallScope, call: ToolCall, start: CallStart, end: CallEnd<ToolCallResult>, approvalRequestId?: string): ToolCallRecord {
  const result = 'value' in end ? end.value : undefined;
  const failed = result?.isError === true;
  return {
    kind: 'tool',
    ...scope,
    ...timing(start, end),
    ...(failed ? { outcome: 'error', error: result.content } : {}),
    name: call.function.name,
    server: result?.source?.server ?? null,
    tool: result?.source?.tool ?? null,
    arguments: call.function.arguments,
    result: result?.content ?? null,
    approvalRequestId: approvalRequestId ?? null,
  };
}

function timing(start: CallStart, end: CallEnd<unknown>): { startedAt: Date; durationMs: number; outcome: CallOutcome; error: string | null } {
  const durationMs = Math.round((performance.now() - start.mark) * 10) / 10;
  if ('value' in end) return { startedAt: start.at, durationMs, outcome: 'ok', error: null };
  return { startedAt: start.at, durationMs, outcome: end.cancelled ? 'cancelled' : 'error', error: errorText(end.error) };
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Two calls' usage added up (either may be null): the reasoning tokens where any call counted
 * them, estimated when any call's was.
 */
export function sumUsage(sum: Usage | null, more: Usage | null): Usage | null {
  if (!more) return sum;
  if (!sum) return { ...more };
  const reasoning = (sum.reasoning_tokens ?? 0) + (more.reasoning_tokens ?? 0);
  return {
    prompt_tokens: sum.prompt_tokens + more.prompt_tokens,
    completion_tokens: sum.completion_tokens + more.completion_tokens,
    total_tokens: sum.total_tokens + more.total_tokens,
    ...(reasoning > 0 ? { reasoning_tokens: reasoning } : {}),
    ...(sum.estimated || more.estimated ? { estimated: true } : {}),
  };
}

/** Adds one call's usage to token totals by model (in place). */
export function addUsage(totals: SessionUsage, model: string, usage: Usage | null): void {
  if (!usage) return;
  const entry = (totals[model] ??= { prompt_tokens: 0, completion_tokens: 0 });
  entry.prompt_tokens += usage.prompt_tokens;
  entry.completion_tokens += usage.completion_tokens;
}

/** Token totals plus more (a new object; neither is changed). */
export function mergeUsage(totals: SessionUsage, more: SessionUsage): SessionUsage {
  const merged: SessionUsage = {};
  for (const [model, usage] of Object.entries(totals)) merged[model] = { ...usage };
  for (const [model, usage] of Object.entries(more)) addUsage(merged, model, withTotal(usage));
  return merged;
}

/** Prompt and completion tokens with their sum. */
export function withTotal(tokens: { prompt_tokens: number; completion_tokens: number }): Usage {
  return { prompt_tokens: tokens.prompt_tokens, completion_tokens: tokens.completion_tokens, total_tokens: tokens.prompt_tokens + tokens.completion_tokens };
}

/** The sum over the models of token totals. */
export function usageTotal(totals: SessionUsage): Usage {
  let prompt = 0;
  let completion = 0;
  for (const usage of Object.values(totals)) {
    prompt += usage.prompt_tokens;
    completion += usage.completion_tokens;
  }
  return withTotal({ prompt_tokens: prompt, completion_tokens: completion });
}
