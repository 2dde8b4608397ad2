import OpenAI from 'openai';
import type { ChatCompletionCreateParamsBase } from 'openai/resources/chat/completions';
import type { ChatMessage, GenerationParams, ToolCall, ToolDefinition, Usage } from './chat-types.js';

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
};

/** The link to the LLM server. */
export type LlmClient = {
  generate(request: LlmRequest, options?: LlmCallOptions): Promise<LlmReply>;
};

/** Settings of the link to the LLM server. */
export type LlmClientOptions = { baseUrl: string; apiKey: string; timeoutMs: number };

/** An LLM call that failed; the message is the description the specification puts in replies. */
export class LlmCallError extends Error {
  override readonly name = 'LlmCallError';
}

/**
 * Creates the LLM client on the `openai` SDK: no retries (a retry could run a turn twice),
 * a per-request time-out, and the caller's AbortSignal on every request.
 */
export function createLlmClient(options: LlmClientOptions): LlmClient {
  const sdk = new OpenAI({
    baseURL: options.baseUrl,
    apiKey: options.apiKey,
    maxRetries: 0,
    timeout: options.timeoutMs,
  });

  async function generate(request: LlmRequest, callOptions: LlmCallOptions = {}): Promise<LlmReply> {
    const body = toRequestBody(request);
    const streaming = Boolean(callOptions.onContent || callOptions.onToolCallDelta);
    try {
      return streaming
        ? await generateStreaming(sdk, body, callOptions)
        : await generateOnce(sdk, body, callOptions.signal);
    } catch (error) {
      if (error instanceof LlmCallError) throw error;
      throw new LlmCallError(describeFailure(error), { cause: error });
    }
  }

  return { generate };
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

async function generateOnce(sdk: OpenAI, body: ChatCompletionCreateParamsBase, signal?: AbortSignal): Promise<LlmReply> {
  const completion = await sdk.chat.completions.create({ ...body, stream: false }, { signal });
  const choice = completion.choices[0];
  if (!choice) throw new LlmCallError('the LLM server returned no choices');
  const toolCalls = (choice.message.tool_calls ?? []).filter((call): call is ToolCall => call.type === 'function');
  return {
    content: choice.message.content ?? '',
    toolCalls,
    finishReason: choice.finish_reason ?? 'stop',
    usage: completion.usage ? pickUsage(completion.usage) : null,
  };
}

async function generateStreaming(
  sdk: OpenAI,
  body: ChatCompletionCreateParamsBase,
  options: LlmCallOptions,
): Promise<LlmReply> {
  const stream = await sdk.chat.completions.create(
    { ...body, stream: true, stream_options: { include_usage: true } },
    { signal: options.signal },
  );
  let content = '';
  let finishReason: string | null = null;
  let usage: Usage | null = null;
  const toolCalls = new ToolCallAssembler();
  for await (const chunk of stream) {
    if (chunk.usage) usage = pickUsage(chunk.usage);
    const choice = chunk.choices[0];
    if (!choice) continue;
    const piece = choice.delta?.content;
    if (piece) {
      content += piece;
      options.onContent?.(piece);
    }
    for (const delta of choice.delta?.tool_calls ?? []) {
      const normalised = toolCalls.add(delta);
      options.onToolCallDelta?.(normalised);
    }
    if (choice.finish_reason) finishReason = choice.finish_reason;
  }
  if (options.signal?.aborted) throw new LlmCallError('the request was cancelled');
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

/** A short description of why an LLM call failed, without stack or secrets. */
function describeFailure(error: unknown): string {
  if (error instanceof OpenAI.APIError && error.status !== undefined) {
    return `${error.status} ${extractMessage(error) ?? 'error from the LLM server'}`;
  }
  if (error instanceof OpenAI.APIConnectionTimeoutError) return 'the LLM server did not answer in time';
  if (error instanceof OpenAI.APIUserAbortError) return 'the request was cancelled';
  if (error instanceof OpenAI.APIConnectionError) return `cannot reach the LLM server (${causeMessage(error)})`;
  return error instanceof Error ? error.message : String(error);
}

function extractMessage(error: InstanceType<typeof OpenAI.APIError>): string | undefined {
  const body = error.error as { message?: unknown } | undefined;
  return typeof body?.message === 'string' ? body.message : undefined;
}

function causeMessage(error: Error): string {
  const cause = error.cause as { code?: string; message?: string } | undefined;
  return cause?.code ?? cause?.message ?? 'connection error';
}
