import type { ChatCompletion, ChatCompletionChunk, ChatCompletionCreateParamsBase } from 'openai/resources/chat/completions';
import { Pool, errors as undiciErrors } from 'undici';
import { readSseData } from './sse-reader.js';
import type { ChatMessage, GenerationParams, ToolCall, ToolDefinition, Usage } from '../chat-types.js';

/** What one LLM call returns once it has finished. */
export type LlmReply = {
  content: string;
  toolCalls: ToolCall[];
  finishReason: string;
  usage: Usage | null;
};

/** A piece of a tool call as it streams: the OpenAI delta shape. */
export type ToolCallDelta = {
  index: number;
  id?: string;
  type?: 'function';
  function?: { name?: string; arguments?: string };
};

/** One LLM call. */
export type LlmRequest = GenerationParams & {
  messages: ChatMessage[];
  tools?: ToolDefinition[];
};

/** How a call is run: cancellation, and when streaming, where the pieces go. */
export type LlmCallOptions = {
  signal?: AbortSignal;
  /** Streams the call and hands each content piece here as it arrives. */
  onContent?: (piece: string) => void;
  /** Streams the call and hands each tool-call piece here as it arrives. */
  onToolCallDelta?: (delta: ToolCallDelta) => void;
  /** Given the exact JSON body of the call just before it is sent. */
  onRequestBody?: (body: string) => void;
};

/** The link to the LLM server. */
export type LlmClient = {
  generate(request: LlmRequest, options?: LlmCallOptions): Promise<LlmReply>;
  /** Closes the kept-alive connections. */
  close(): Promise<void>;
};

/** Settings of the link to the LLM server. */
export type LlmClientOptions = { baseUrl: string; apiKey: string; timeoutMs: number };

/** An LLM call that failed; the message is the description the specification puts in replies. */
export class LlmCallError extends Error {
  override readonly name = 'LlmCallError';
}

/**
 * Creates the LLM client: the OpenAI chat-completions protocol, typed with the `openai`
 * package, over a keep-alive undici pool (the SDK's own request path costs several times
 * the CPU per call). No retries (a retry could run a turn twice), a per-request time-out,
 * and the caller's AbortSignal on every request.
 */
export function createLlmClient(options: LlmClientOptions): LlmClient {
  const base = new URL(options.baseUrl.replace(/\/+$/, '') + '/');
  const pool = new Pool(base.origin, { connections: 256, keepAliveTimeout: 30_000 });
  const path = `${base.pathname}chat/completions`;
  const headers = { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${options.apiKey}` };

  async function generate(request: LlmRequest, callOptions: LlmCallOptions = {}): Promise<LlmReply> {
    const streaming = Boolean(callOptions.onContent || callOptions.onToolCallDelta);
    const body: ChatCompletionCreateParamsBase = toRequestBody(request);
    if (streaming) Object.assign(body, { stream: true, stream_options: { include_usage: true } });
    const call = new CallSignal(callOptions.signal, options.timeoutMs);
    const { signal } = call;
    try {
      const text = JSON.stringify(body);
      callOptions.onRequestBody?.(text);
      const response = await pool.request({ path, method: 'POST', headers, body: text, signal });
      if (response.statusCode !== 200) {
        throw new LlmCallError(`${response.statusCode} ${errorMessageOf(await response.body.text().catch(() => ''))}`);
      }
      return streaming ? await readStream(response.body, callOptions, signal) : toReply((await response.body.json()) as ChatCompletion);
    } catch (error) {
      if (error instanceof LlmCallError) throw error;
      throw new LlmCallError(describeFailure(error, callOptions.signal, call.timedOut), { cause: error });
    } finally {
      call.done();
    }
  }

  return { generate, close: () => pool.close() };
}

function toRequestBody(request: LlmRequest): ChatCompletionCreateParamsBase {
  const body: ChatCompletionCreateParamsBase = {
    model: request.model,
    messages: request.messages,
    temperature: request.temperature,
    max_tokens: request.max_tokens,
  };
  if (request.tools && request.tools.length > 0) body.tools = request.tools;
  return body;
}

function toReply(completion: ChatCompletion): LlmReply {
  const choice = completion.choices?.[0];
  if (!choice) throw new LlmCallError('the LLM server returned no choices');
  const toolCalls = (choice.message.tool_calls ?? []).filter((call): call is ToolCall => call.type === 'function');
  return {
    content: choice.message.content ?? '',
    toolCalls,
    finishReason: choice.finish_reason ?? 'stop',
    usage: completion.usage ? pickUsage(completion.usage) : null,
  };
}

async function readStream(body: AsyncIterable<Buffer>, options: LlmCallOptions, signal: AbortSignal): Promise<LlmReply> {
  let content = '';
  let finishReason: string | null = null;
  let usage: Usage | null = null;
  const toolCalls = new ToolCallAssembler();
  for await (const data of readSseData(body)) {
    if (data === '[DONE]') break;
    const chunk = JSON.parse(data) as ChatCompletionChunk & { error?: { message?: string } };
    if (chunk.error) throw new LlmCallError(chunk.error.message ?? 'the LLM server reported an error mid-stream');
    if (chunk.usage) usage = pickUsage(chunk.usage);
    const choice = chunk.choices?.[0];
    if (!choice) continue;
    const piece = choice.delta?.content;
    if (piece) {
      content += piece;
      options.onContent?.(piece);
    }
    for (const delta of choice.delta?.tool_calls ?? []) options.onToolCallDelta?.(toolCalls.add(delta));
    if (choice.finish_reason) finishReason = choice.finish_reason;
  }
  if (signal.aborted) throw signal.reason;
  if (finishReason === null) throw new LlmCallError('the LLM stream ended before the reply was complete');
  return { content, toolCalls: toolCalls.calls(), finishReason, usage };
}

/** Rebuilds whole tool calls from streamed deltas, keyed by their index. */
class ToolCallAssembler {
  private readonly byIndex = new Map<number, ToolCall>();

  add(delta: ToolCallDelta): ToolCallDelta {
    let call = this.byIndex.get(delta.index);
    if (!call) {
      call = { id: delta.id ?? '', type: 'function', function: { name: '', arguments: '' } };
      this.byIndex.set(delta.index, call);
    }
    if (delta.id) call.id = delta.id;
    if (delta.function?.name) call.function.name += delta.function.name;
    if (delta.function?.arguments) call.function.arguments += delta.function.arguments;
    return delta;
  }

  calls(): ToolCall[] {
    return [...this.byIndex.entries()].sort(([a], [b]) => a - b).map(([, call]) => call);
  }
}

function pickUsage(usage: Usage): Usage {
  return {
    prompt_tokens: usage.prompt_tokens,
    completion_tokens: usage.completion_tokens,
    total_tokens: usage.total_tokens,
  };
}

/** The message of an OpenAI error body, or a short piece of whatever the server sent. */
function errorMessageOf(text: string): string {
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    if (typeof parsed.error === 'string') return parsed.error;
    if (typeof parsed.error?.message === 'string') return parsed.error.message;
    if (typeof parsed.message === 'string') return parsed.message;
  } catch {
    // not JSON: fall through
  }
  return text.trim().slice(0, 200) || 'error from the LLM server';
}

/**
 * The signal of one LLM call: aborted by the caller's signal or after `timeoutMs`. One
 * controller and one timer, both let go when the call is done (`AbortSignal.any` and
 * `AbortSignal.timeout` cost several times as much a call, and keep their signals for the
 * garbage collector to trace).
 */
class CallSignal {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private readonly onCallerAbort: (() => void) | undefined;
  timedOut = false;

  constructor(
    private readonly caller: AbortSignal | undefined,
    timeoutMs: number,
  ) {
    this.timer = setTimeout(() => {
      this.timedOut = true;
      this.controller.abort(new DOMException('The LLM call timed out', 'TimeoutError'));
    }, timeoutMs);
    if (caller?.aborted) this.controller.abort(caller.reason);
    else if (caller) {
      this.onCallerAbort = () => this.controller.abort(caller.reason);
      caller.addEventListener('abort', this.onCallerAbort, { once: true });
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  done(): void {
    clearTimeout(this.timer);
    if (this.onCallerAbort) this.caller?.removeEventListener('abort', this.onCallerAbort);
  }
}

/** A short description of why an LLM call failed, without stack or secrets. */
function describeFailure(error: unknown, callerSignal: AbortSignal | undefined, timedOut: boolean): string {
  if (callerSignal?.aborted) return 'the request was cancelled';
  if (timedOut || error instanceof undiciErrors.HeadersTimeoutError || error instanceof undiciErrors.BodyTimeoutError) {
    return 'the LLM server did not answer in time';
  }
  const code = (error as { code?: string; cause?: { code?: string } } | null)?.code ?? (error as { cause?: { code?: string } } | null)?.cause?.code;
  if (code && /^(ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ETIMEDOUT|UND_ERR_CONNECT_TIMEOUT)$/.test(code)) {
    return `cannot reach the LLM server (${code})`;
  }
  if (code && /^(ECONNRESET|EPIPE|UND_ERR_SOCKET|UND_ERR_CLOSED)$/.test(code)) return `the connection to the LLM server broke (${code})`;
  if (error instanceof SyntaxError) return 'the LLM server sent a reply that is not valid JSON';
  return error instanceof Error ? error.message : String(error);
}
