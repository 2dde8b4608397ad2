import { diag, DiagLogLevel, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
} from '@opentelemetry/sdk-trace-base';
import type { ToolCall, Usage } from '../chat-types.js';
import type { LlmReply, LlmRequest } from '../llm/llm-client.js';
import type { ToolCallResult } from '../tools/tool-runner.js';
import { ATTR, GEN_AI_OPERATION, GEN_AI_PROVIDER } from './genai-attributes.js';
import { inputMessagesOf, outputMessagesOf, systemInstructionsOf } from './genai-messages.js';
import type { LlmSpan, RequestSpan, ToolSpan, TracedEnd, TracedSpan, TraceIds, Tracing, TracingSettings, TurnSpan } from './tracing.js';

/**
 * The OpenTelemetry SDK behind `Tracing`: a tracer provider of its own (not registered as the
 * global one, so that two services in one process, as in tests, keep theirs apart), a batch
 * processor and the OTLP/HTTP exporter of the configured protocol. Imported only when tracing is on.
 */
export function createOtelTracing(settings: TracingSettings, onError: (message: string) => void): Tracing {
  reportSdkErrors(onError);
  const exporterSettings = { url: settings.url, headers: settings.headers, timeoutMillis: settings.timeoutMs };
  const exporter = settings.protocol === 'http/json' ? new JsonTraceExporter(exporterSettings) : new ProtobufTraceExporter(exporterSettings);
  const provider = new BasicTracerProvider({
    resource: defaultResource().merge(resourceFromAttributes({ [ATTR.SERVICE_NAME]: settings.serviceName })),
    sampler: samplerOf(settings),
    // Every setting given: the processor reads OTEL_BSP_* itself only for those it is not given.
    spanProcessors: [new BatchSpanProcessor(exporter, settings.batch)],
  });
  return new OtelTracing(provider, provider.getTracer('svc-agent'), settings);
}

/** How often at most the SDK's errors are reported: a collector that is down fails every batch. */
const ERROR_REPORT_INTERVAL_MS = 60_000;

/**
 * Sends the SDK's warnings and errors (failed exports above all) to `onError`, the first at once,
 * then at most one a minute, with how many were left out. The SDK reports them through the API's
 * one diagnostic logger (process-wide: the last service started in a process sets it).
 */
function reportSdkErrors(onError: (message: string) => void): void {
  let last = Number.NEGATIVE_INFINITY;
  let skipped = 0;
  const report = (message: unknown, ...args: unknown[]) => {
    const now = performance.now();
    if (now - last < ERROR_REPORT_INTERVAL_MS) {
      skipped += 1;
      return;
    }
    last = now;
    const text = [message, ...args].map(diagnosticText).join(' ');
    onError(`${text}${skipped > 0 ? ` (and ${skipped} more since the last report)` : ''}`);
    skipped = 0;
  };
  const quiet = () => undefined;
  diag.setLogger({ error: report, warn: report, info: quiet, debug: quiet, verbose: quiet }, { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true });
}

/** A diagnostic's part as text: the SDK hands an export's failure over as the error's properties in JSON (stack included); its message is enough. */
function diagnosticText(part: unknown): string {
  if (part instanceof Error) return part.message;
  if (typeof part !== 'string') return JSON.stringify(part) ?? String(part);
  if (!part.startsWith('{')) return part;
  try {
    const parsed = JSON.parse(part) as { message?: unknown };
    return typeof parsed.message === 'string' ? parsed.message : part;
  } catch {
    return part;
  }
}

/** `OTEL_TRACES_SAMPLER` and its argument, as the SDK would read them. */
function samplerOf(settings: TracingSettings): Sampler {
  const ratio = new TraceIdRatioBasedSampler(settings.samplerArg);
  switch (settings.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio;
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

const propagator = new W3CTraceContextPropagator();

/** Reads the incoming `traceparent` and `tracestate` for the propagator. */
const incomingGetter = {
  get: (carrier: { traceparent?: string; tracestate?: string }, key: string) => (key === 'traceparent' ? carrier.traceparent : key === 'tracestate' ? carrier.tracestate : undefined),
  keys: () => ['traceparent', 'tracestate'],
};

class OtelTracing implements Tracing {
  private readonly server: Attributes;
  private readonly agentName: string;

  constructor(
    private readonly provider: BasicTracerProvider,
    private readonly tracer: Tracer,
    private readonly settings: TracingSettings,
  ) {
    this.server = serverAttributes(settings.llmBaseUrl);
    this.agentName = settings.serviceName;
  }

  startRequest(method: string, path: string, incoming: { traceparent?: string; tracestate?: string }): RequestSpan {
    const parent = incoming.traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, incoming, incomingGetter);
    const span = this.tracer.startSpan(method, { kind: SpanKind.SERVER, attributes: { [ATTR.HTTP_REQUEST_METHOD]: method, [ATTR.URL_PATH]: path } }, parent);
    return new OtelRequestSpan(span, method);
  }

  startTurn(parent: TracedSpan | undefined, sessionId: string): TurnSpan {
    const span = this.tracer.startSpan(
      `${GEN_AI_OPERATION.INVOKE_AGENT} ${this.agentName}`,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          [ATTR.GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION.INVOKE_AGENT,
          [ATTR.GEN_AI_PROVIDER_NAME]: GEN_AI_PROVIDER,
          [ATTR.GEN_AI_AGENT_NAME]: this.agentName,
          [ATTR.GEN_AI_CONVERSATION_ID]: sessionId,
        },
      },
      contextOf(parent),
    );
    return new OtelTurnSpan(span);
  }

  startLlmCall(parent: TracedSpan, sessionId: string, request: LlmRequest, streaming: boolean): LlmSpan {
    const attributes: Attributes = {
      [ATTR.GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION.CHAT,
      [ATTR.GEN_AI_PROVIDER_NAME]: GEN_AI_PROVIDER,
      [ATTR.GEN_AI_REQUEST_MODEL]: request.model,
      [ATTR.GEN_AI_CONVERSATION_ID]: sessionId,
      [ATTR.GEN_AI_REQUEST_TEMPERATURE]: request.temperature,
      [ATTR.GEN_AI_REQUEST_MAX_TOKENS]: request.max_tokens,
      [ATTR.GEN_AI_REQUEST_STREAM]: streaming,
      ...this.server,
    };
    if (this.settings.captureContent) {
      const system = systemInstructionsOf(request.messages);
      if (system.length > 0) attributes[ATTR.GEN_AI_SYSTEM_INSTRUCTIONS] = JSON.stringify(system);
      attributes[ATTR.GEN_AI_INPUT_MESSAGES] = JSON.stringify(inputMessagesOf(request.messages));
    }
    const span = this.tracer.startSpan(`${GEN_AI_OPERATION.CHAT} ${request.model}`, { kind: SpanKind.CLIENT, attributes }, contextOf(parent));
    return new OtelLlmSpan(span, this.settings.captureContent);
  }

  startToolCall(parent: TracedSpan, sessionId: string, call: ToolCall): ToolSpan {
    const attributes: Attributes = {
      [ATTR.GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION.EXECUTE_TOOL,
      [ATTR.GEN_AI_TOOL_NAME]: call.function.name,
      [ATTR.GEN_AI_TOOL_CALL_ID]: call.id,
      [ATTR.GEN_AI_TOOL_TYPE]: 'function',
      [ATTR.GEN_AI_CONVERSATION_ID]: sessionId,
    };
    if (this.settings.captureContent) attributes[ATTR.GEN_AI_TOOL_CALL_ARGUMENTS] = call.function.arguments;
    const span = this.tracer.startSpan(`${GEN_AI_OPERATION.EXECUTE_TOOL} ${call.function.name}`, { kind: SpanKind.INTERNAL, attributes }, contextOf(parent));
    return new OtelToolSpan(span, this.settings.captureContent);
  }

  async shutdown(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    try {
      // A collector that is down must not hold up the service's stop: what is not sent by then is lost.
      await Promise.race([this.provider.shutdown().catch(() => undefined), late]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** What every span of the service holds: the SDK's span, its ids and its `traceparent`. */
class OtelSpan implements TracedSpan {
  readonly ids: TraceIds | undefined;
  readonly traceparent: string;
  private isEnded = false;

  constructor(readonly span: Span) {
    const { traceId, spanId, traceFlags } = span.spanContext();
    const sampled = (traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED;
    this.ids = sampled ? { traceId, spanId } : undefined;
    this.traceparent = `00-${traceId}-${spanId}-0${sampled ? 1 : 0}`;
  }

  /** True the first time only: a span is ended once, whichever path ends it. */
  protected ending(): boolean {
    if (this.isEnded) return false;
    this.isEnded = true;
    return true;
  }

  /** Marks the span failed with an `error.type` (a class of failure, not its text) and the error's message. */
  protected fail(type: string, message?: string): void {
    this.span.setAttribute(ATTR.ERROR_TYPE, type);
    this.span.setStatus({ code: SpanStatusCode.ERROR, ...(message ? { message } : {}) });
  }
}

/** The context a child of `parent` starts in; none or another kind: a root span. */
function contextOf(parent: TracedSpan | undefined): Context {
  return parent instanceof OtelSpan ? trace.setSpan(ROOT_CONTEXT, parent.span) : ROOT_CONTEXT;
}

class OtelRequestSpan extends OtelSpan implements RequestSpan {
  constructor(
    span: Span,
    private readonly method: string,
  ) {
    super(span);
  }

  end(route: string | undefined, status: number): void {
    if (!this.ending()) return;
    if (route !== undefined) {
      this.span.updateName(`${this.method} ${route}`);
      this.span.setAttribute(ATTR.HTTP_ROUTE, route);
    }
    this.span.setAttribute(ATTR.HTTP_RESPONSE_STATUS_CODE, status);
    // The HTTP conventions: a server span fails on a 5xx only (a 4xx is the client's).
    if (status >= 500) this.fail(String(status));
    this.span.end();
  }
}

class OtelTurnSpan extends OtelSpan implements TurnSpan {
  end(outcome: { usage: Usage | null; error?: string }): void {
    if (!this.ending()) return;
    if (outcome.usage) this.span.setAttributes(usageAttributes(outcome.usage));
    if (outcome.error !== undefined) this.fail(outcome.error);
    this.span.end();
  }
}

class OtelLlmSpan extends OtelSpan implements LlmSpan {
  constructor(
    span: Span,
    private readonly captureContent: boolean,
  ) {
    super(span);
  }

  end(end: TracedEnd<LlmReply>): void {
    if (!this.ending()) return;
    if ('value' in end) {
      const reply = end.value;
      const attributes: Attributes = { [ATTR.GEN_AI_RESPONSE_FINISH_REASONS]: [reply.finishReason], ...(reply.usage ? usageAttributes(reply.usage) : {}) };
      if (reply.responseId) attributes[ATTR.GEN_AI_RESPONSE_ID] = reply.responseId;
      if (reply.responseModel) attributes[ATTR.GEN_AI_RESPONSE_MODEL] = reply.responseModel;
      if (this.captureContent) attributes[ATTR.GEN_AI_OUTPUT_MESSAGES] = JSON.stringify(outputMessagesOf(reply));
      this.span.setAttributes(attributes);
    } else {
      this.fail(end.cancelled ? 'cancelled' : errorTypeOf(end.error), errorMessage(end.error));
    }
    this.span.end();
  }
}

class OtelToolSpan extends OtelSpan implements ToolSpan {
  constructor(
    span: Span,
    private readonly captureContent: boolean,
  ) {
    super(span);
  }

  end(end: TracedEnd<ToolCallResult>): void {
    if (!this.ending()) return;
    if ('value' in end) {
      const result = end.value;
      if (this.captureContent) this.span.setAttribute(ATTR.GEN_AI_TOOL_CALL_RESULT, result.content);
      // A tool's error is a result the model reads; the span still records that the call failed.
      if (result.isError) this.fail('tool_error');
    } else {
      this.fail(end.cancelled ? 'cancelled' : errorTypeOf(end.error), errorMessage(end.error));
    }
    this.span.end();
  }
}

/** The usage attributes of an LLM call (or of a turn's calls added up). */
function usageAttributes(usage: Usage): Attributes {
  return {
    [ATTR.GEN_AI_USAGE_INPUT_TOKENS]: usage.prompt_tokens,
    [ATTR.GEN_AI_USAGE_OUTPUT_TOKENS]: usage.completion_tokens,
    ...(usage.reasoning_tokens !== undefined ? { [ATTR.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS]: usage.reasoning_tokens } : {}),
  };
}

/**
 * `error.type` of a failure: its code when it has one (`context_length_exceeded`), the HTTP status
 * the server answered (`503`, as the HTTP conventions give it), else its class's name.
 */
function errorTypeOf(error: unknown): string {
  const { code, status } = (error ?? {}) as { code?: unknown; status?: unknown };
  if (typeof code === 'string' && code !== '') return code;
  if (typeof status === 'number') return String(status);
  return error instanceof Error ? error.name : '_OTHER';
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** `server.address` and `server.port` of the LLM server. */
function serverAttributes(baseUrl: string): Attributes {
  try {
    const url = new URL(baseUrl);
    const port = url.port !== '' ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
    return { [ATTR.SERVER_ADDRESS]: url.hostname, [ATTR.SERVER_PORT]: port };
  } catch {
    return {};
  }
}
