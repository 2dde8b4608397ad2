import type { ToolCall, Usage } from '../chat-types.js';
import type { LlmReply, LlmRequest } from '../llm/llm-client.js';
import type { ToolCallResult } from '../tools/tool-runner.js';

/** A span's ids as log lines and call records carry them: 32 and 16 hex digits. */
export type TraceIds = { traceId: string; spanId: string };

/** A span the service started, as its callers hold it. */
export interface TracedSpan {
  /** Its ids when it is sampled (kept and exported); undefined when not: no trace store will have it. */
  readonly ids: TraceIds | undefined;
  /** Its W3C `traceparent`, sent on the requests made under it (the LLM call, an HTTP tool server's call). */
  readonly traceparent: string;
}

/** The span of an HTTP request the service serves. */
export interface RequestSpan extends TracedSpan {
  /** Ends it with the route that matched (none: no route did) and the status answered. */
  end(route: string | undefined, status: number): void;
}

/** The span of one turn of a session: the agent's invocation. */
export interface TurnSpan extends TracedSpan {
  /** Ends it: `usage`, the tokens its LLM calls used; `error`, what it failed with (a class, e.g. `cancelled`). */
  end(outcome: { usage: Usage | null; error?: string }): void;
}

/** How a traced call ended. */
export type TracedEnd<T> = { value: T } | { error: unknown; cancelled: boolean };

/** The span of one LLM call. */
export interface LlmSpan extends TracedSpan {
  end(end: TracedEnd<LlmReply>): void;
}

/** The span of one call of the service's tools. */
export interface ToolSpan extends TracedSpan {
  end(end: TracedEnd<ToolCallResult>): void;
}

/**
 * Where the service's spans go: one per HTTP request, per turn (`invoke_agent`), per LLM call
 * (`chat`) and per tool call (`execute_tool`), each a child of the one it runs under, passed
 * explicitly (no context manager: AsyncLocalStorage would hook every promise of the process).
 */
export interface Tracing {
  /** A request's span, the child of the `traceparent` it came with (when valid). */
  startRequest(method: string, path: string, incoming: { traceparent?: string; tracestate?: string }): RequestSpan;
  /** A turn's span, under `parent` (the request's; none: a root span). */
  startTurn(parent: TracedSpan | undefined, sessionId: string): TurnSpan;
  /** An LLM call's span under its turn's. */
  startLlmCall(parent: TracedSpan, sessionId: string, request: LlmRequest, streaming: boolean): LlmSpan;
  /** A tool call's span under its turn's. */
  startToolCall(parent: TracedSpan, sessionId: string, call: ToolCall): ToolSpan;
  /** Sends the spans still queued and stops; bounded by `timeoutMs`, never rejects. */
  shutdown(timeoutMs: number): Promise<void>;
}

/** How spans are made and sent (the `tracing.*` settings, read by config/). */
export type TracingSettings = {
  /** The OTLP/HTTP URL spans are posted to. */
  url: string;
  protocol: 'http/protobuf' | 'http/json';
  headers: Record<string, string>;
  timeoutMs: number;
  serviceName: string;
  sampler: 'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';
  samplerArg: number;
  batch: { scheduledDelayMillis: number; exportTimeoutMillis: number; maxQueueSize: number; maxExportBatchSize: number };
  /** Record messages, system instructions, tool arguments and results in the spans. */
  captureContent: boolean;
  /** The LLM server's base URL, for the LLM spans' `server.address` and `server.port`. */
  llmBaseUrl: string;
};
