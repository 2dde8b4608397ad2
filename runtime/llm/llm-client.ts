import type { ChatCompletionCreateParamsBase } from 'openai/resources/chat/completions';
import type { ChatMessage, GenerationParams, ToolCall, ToolDefinition, Usage } from '../chat-types.js';
import { CallSignal } from './call-signal.js';
import { shapeForTemplate } from './chat-template-shape.js';
import { ContextOverflow, fitContext } from './context-window.js';
import { ReplyNormalizer, type NormalizedReply } from './reply-normalizer.js';
import { LlmServerProfile, type ServerReport, type ServerSettings } from './server-profile.js';
import { readSseData } from './sse-reader.js';
import { estimatePromptTokens } from './token-estimate.js';
import type { ToolCallDelta } from './tool-call-assembler.js';
import { withToolsInPrompt } from './tools-in-prompt.js';
import { sendWithRetries } from './upstream-retries.js';
import { classifyUpstreamError, describeFailure, LlmCallError, upstreamErrorOf, upstreamFailure, type UpstreamError } from './upstream-errors.js';
import { UpstreamHttp } from './upstream-http.js';
import { countUsage } from './usage-count.js';

export { LlmCallError } from './upstream-errors.js';
export type { ToolCallDelta } from './tool-call-assembler.js';

/** What one LLM call returns once it has finished, in one shape whatever the server sent. */
export type LlmReply = {
  content: string;
  /** The model's reasoning (never part of `content`, never sent back to the model); '' when it gave none. */
  reasoning: string;
  toolCalls: ToolCall[];
  finishReason: string;
  usage: Usage | null;
  /** What the service mended or made of the server's answer, by name (for the call's record). */
  repairs: string[];
  /** The completion's id (`chatcmpl-…`) and the model that answered, as the server named them (absent: it did not). */
  responseId?: string;
  responseModel?: string;
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
  /** Streams the call and hands each piece of the model's reasoning here as it arrives. */
  onReasoning?: (piece: string) => void;
  /** Streams the call and hands each tool-call piece here as it arrives. */
  onToolCallDelta?: (delta: ToolCallDelta) => void;
  /** Given the exact JSON body of the call just before it is sent (again, if the call is made again). */
  onRequestBody?: (body: string) => void;
  /** The W3C `traceparent` of the call's span, sent as its header (tracing on). */
  traceparent?: string;
};

/** The link to the LLM server. */
export type LlmClient = {
  generate(request: LlmRequest, options?: LlmCallOptions): Promise<LlmReply>;
  /** Asks the server what it can tell of itself (its model and context window) ahead of the first call; never rejects. */
  probe(): Promise<void>;
  /** What the service learnt of the server (`/health`). */
  server(): ServerReport;
  /** Closes the kept-alive connections. */
  close(): Promise<void>;
};

/** Settings of the link to the LLM server. */
export type LlmClientOptions = {
  baseUrl: string;
  apiKey: string;
  timeoutMs: number;
  /** Connections kept to the server at most (`llm.max_connections`). */
  maxConnections?: number;
  /** Attempts after the first for a call the server turned away busy, or that never reached it (`llm.max_retries`). */
  maxRetries?: number;
  /** The most tokens a call asks for its reply, whatever the request asked (`llm.max_tokens_limit`). */
  maxTokensLimit?: number;
  /** The model the side endpoints are asked about (Ollama's `/api/ps`, the tokenizer). */
  model?: string;
  /** What cannot be learnt, or should not be (`llm.context_window`, `llm.tool_call_parser`, `llm.alternate_roles`). */
  server?: Partial<ServerSettings>;
  /** How long the server's side endpoints (`/v1/models`, `/props`, `/tokenize`) are given, in ms. */
  probeTimeoutMs?: number;
};

/** A reply may run to this many characters a token of its `max_tokens` (a token is rarely half as long) before it is cut. */
const CHARS_PER_TOKEN_BOUND = 16;

/** How often a call is made again in a shape learnt from the server's error. */
const MAX_RESHAPES = 3;

/** How long a call waits at most for the server's profile (its window, first of all) before going without it. */
const PROFILE_WAIT_MS = 2000;

/** After a probe that learnt nothing, how long before the next call asks again. */
const REPROBE_MS = 30_000;

/**
 * Creates the LLM client: the OpenAI chat-completions protocol over a keep-alive undici pool
 * (the `openai` SDK's own request path costs several times the CPU per call; its types stay).
 * It is where the servers' differences end (vLLM, SGLang, Ollama, llama.cpp, each in its
 * versions): a call is fitted into the model's context window and shaped as its chat template
 * wants, and whatever the server sends back is turned into one shape (`ReplyNormalizer`);
 * what the server refuses for a reason the service can mend (alternating roles, no system
 * role, no tool-call parser, a window smaller than estimated) it learns and asks again. A call
 * turned away busy (429, 503) or lost on a connection the server had just closed is sent again
 * within `maxRetries`; any other failure is the caller's, as an `LlmCallError`.
 */
export function createLlmClient(options: LlmClientOptions): LlmClient {
  const http = new UpstreamHttp({ baseUrl: options.baseUrl, apiKey: options.apiKey, maxConnections: options.maxConnections ?? 256 });
  const profile = new LlmServerProfile({ contextWindow: 0, toolCallParser: 'auto', alternateRoles: 'auto', ...options.server });
  const chatPath = http.apiPath('chat/completions');
  const probeTimeoutMs = options.probeTimeoutMs ?? PROFILE_WAIT_MS;
  const model = options.model ?? 'default';
  const maxRetries = options.maxRetries ?? 2;
  const maxTokensLimit = options.maxTokensLimit ?? Number.MAX_SAFE_INTEGER;
  let probed: { at: number; done: Promise<void> } | undefined;

  /** Asks the server what the profile needs, once (and again later while it has not told its window). */
  function probe(): Promise<void> {
    const now = performance.now();
    if (probed && (profile.contextWindow !== undefined || now - probed.at < REPROBE_MS)) return probed.done;
    probed = { at: now, done: probeServer(http, profile, model, probeTimeoutMs) };
    return probed.done;
  }

  async function generate(request: LlmRequest, callOptions: LlmCallOptions = {}): Promise<LlmReply> {
    const call = new CallSignal(callOptions.signal, options.timeoutMs);
    try {
      await call.race(probe());
      const streaming = isStreaming(callOptions);
      for (let reshapes = 0; ; reshapes++) {
        const prepared = prepare(request, profile, streaming, maxTokensLimit);
        const text = JSON.stringify(prepared.body);
        callOptions.onRequestBody?.(text);
        const response = await sendWithRetries(() => http.post(chatPath, text, call.signal, callOptions.traceparent), { maxRetries, signal: call.signal });
        if (response.statusCode !== 200) {
          const error = upstreamErrorOf(response.statusCode, await response.body.text().catch(() => ''));
          if (reshapes < MAX_RESHAPES && learnFrom(error, prepared, profile)) continue;
          throw upstreamFailure(error);
        }
        const normalizer = new ReplyNormalizer({
          toolFormats: prepared.tools.length > 0 ? profile.toolFormats : [],
          startsInReasoning: profile.startsInReasoning,
          maxChars: Math.max(1, prepared.body.max_tokens ?? request.max_tokens) * CHARS_PER_TOKEN_BOUND,
          onContent: callOptions.onContent,
          onReasoning: callOptions.onReasoning,
          onToolCallDelta: callOptions.onToolCallDelta,
        });
        if (streaming) await readStream(response.body, normalizer, call.signal);
        else normalizer.completion((await response.body.json()) as Record<string, unknown>);
        return await finish(normalizer.result(), prepared, streaming);
      }
    } catch (error) {
      if (error instanceof LlmCallError) throw error;
      if (error instanceof ContextOverflow) throw new LlmCallError(error.message, { code: 'context_length_exceeded', cause: error });
      throw new LlmCallError(describeFailure(error, callOptions.signal, call.timedOut), { cause: error });
    } finally {
      call.done();
    }
  }

  /** The reply, with its usage counted when the server sent none, and what it showed learnt. */
  async function finish(reply: NormalizedReply, prepared: PreparedCall, streaming: boolean): Promise<LlmReply> {
    if (reply.finishReason === null) {
      if (streaming) throw new LlmCallError('the LLM stream ended before the reply was complete');
      reply.finishReason = reply.toolCalls.length > 0 ? 'tool_calls' : 'stop';
    }
    profile.observe(reply.observed);
    const repairs = [...prepared.repairs, ...reply.observed.repairs];
    if (reply.cut) repairs.push('reply_cut');
    let usage = reply.usage;
    if (streaming) profile.streamsUsage = usage !== null || profile.streamsUsage === true;
    if (usage === null) {
      usage = await countUsage({ messages: prepared.body.messages, tools: prepared.body.tools }, reply, (text) => countTokens(http, profile, model, text, probeTimeoutMs));
      repairs.push('usage_counted');
    } else {
      profile.learnTokenScale(usage.prompt_tokens, estimatePromptTokens(prepared.body.messages, prepared.body.tools));
    }
    return {
      content: reply.content,
      reasoning: reply.reasoning,
      toolCalls: reply.toolCalls,
      finishReason: reply.finishReason,
      usage,
      repairs,
      ...(reply.id !== null ? { responseId: reply.id } : {}),
      ...(reply.model !== null ? { responseModel: reply.model } : {}),
    };
  }

  return { generate, probe, server: () => profile.report(), close: () => http.close() };
}

/** A call as it is sent: its body, the tools it offers natively, and what was changed to make it fit the server. */
type PreparedCall = {
  body: ChatCompletionCreateParamsBase & { messages: ChatMessage[]; tools?: ToolDefinition[] };
  tools: ToolDefinition[];
  /** More of the history could be left out if the server's count is higher than the estimate. */
  droppable: boolean;
  repairs: string[];
};

/**
 * The body of a call as the server wants it: the tools described in the prompt when it parses
 * no tool calls, its `max_tokens` within `maxTokensLimit` and what the window leaves, fitted
 * into the context window (when known), shaped for the chat template; usage asked for when
 * streaming.
 */
function prepare(request: LlmRequest, profile: LlmServerProfile, streaming: boolean, maxTokensLimit: number): PreparedCall {
  const tools = request.tools ?? [];
  const repairs: string[] = [];
  let maxTokens = Math.min(request.max_tokens, maxTokensLimit);
  const native = tools.length > 0 && profile.nativeTools;
  let messages = request.messages;
  if (tools.length > 0 && !native) {
    messages = withToolsInPrompt(messages, tools);
    repairs.push('tools_in_prompt');
  }
  let droppable = false;
  const window = profile.contextWindow;
  if (window !== undefined) {
    const fitted = fitContext(messages, { window, maxTokens, tools: native ? tools : undefined, scale: profile.tokenScale });
    if (fitted.dropped > 0) repairs.push(`context_fitted:${fitted.dropped}`);
    droppable = fitted.history > 0;
    messages = fitted.messages;
    maxTokens = fitted.maxTokens;
  }
  if (maxTokens < request.max_tokens) repairs.push(`max_tokens_lowered:${maxTokens}`);
  const shaped = shapeForTemplate(messages, profile.templateRules);
  if (shaped.length !== messages.length) repairs.push('messages_shaped');
  const body: PreparedCall['body'] = { model: request.model, messages: shaped, temperature: request.temperature, max_tokens: maxTokens };
  if (native) body.tools = tools;
  if (streaming) Object.assign(body, { stream: true, stream_options: { include_usage: true } });
  return { body, tools, droppable, repairs };
}

/** Whether a call streams: when it has somewhere to stream to. */
function isStreaming(options: LlmCallOptions): boolean {
  return Boolean(options.onContent || options.onToolCallDelta || options.onReasoning);
}

/** Learns from an error answer what to send instead; true when the call is worth making again. */
function learnFrom(error: UpstreamError, prepared: PreparedCall, profile: LlmServerProfile): boolean {
  switch (classifyUpstreamError(error)) {
    case 'roles_must_alternate':
    case 'system_role_unsupported':
      return profile.learnTemplate(classifyUpstreamError(error) as 'roles_must_alternate' | 'system_role_unsupported');
    case 'no_native_tools':
      return prepared.body.tools !== undefined && profile.learnNoNativeTools();
    case 'context_length':
      // A window the error names that the service did not know (a proxy hid it): fit into it.
      if (error.contextWindow !== undefined && profile.contextWindow === undefined) return profile.learnWindow(error.contextWindow, 'error');
      // The server counts more than the estimate: fit tighter, while there is history to leave out.
      return prepared.droppable && profile.learnTighterFit();
    default:
      return false;
  }
}

/** Reads a streamed reply into the normaliser, up to the end (or to the bound, leaving the rest unread). */
async function readStream(body: AsyncIterable<Buffer>, normalizer: ReplyNormalizer, signal: AbortSignal): Promise<void> {
  reading: for await (const events of readSseData(body)) {
    for (const data of events) {
      if (data === '[DONE]') break reading;
      let chunk: Record<string, unknown>;
      try {
        chunk = JSON.parse(data) as Record<string, unknown>;
      } catch (error) {
        throw new LlmCallError('the LLM server sent a stream event that is not valid JSON', { cause: error });
      }
      const failure = chunk.error;
      if (failure !== undefined && failure !== null) {
        // A failure mid-stream: SGLang and vLLM send `{"error": {...}}`, llama.cpp too (then ends without [DONE]).
        throw upstreamFailure(upstreamErrorOf(0, JSON.stringify(chunk)));
      }
      normalizer.chunk(chunk);
      if (normalizer.isCut) break reading;
    }
  }
  if (signal.aborted) throw signal.reason;
}

/**
 * Asks the server for its model and context window: `/v1/models` (vLLM and SGLang give
 * `max_model_len`), then, while the window is still unknown, llama.cpp's `/props` and
 * Ollama's `/api/ps`. What it cannot learn stays unknown; nothing here fails a call.
 */
async function probeServer(http: UpstreamHttp, profile: LlmServerProfile, model: string, timeoutMs: number): Promise<void> {
  profile.observeModels(await http.getJson(http.apiPath('models'), timeoutMs));
  if (profile.contextWindow === undefined) profile.observeProps(await http.getJson('/props', timeoutMs));
  if (profile.contextWindow === undefined) profile.observeOllamaModels(await http.getJson('/api/ps', timeoutMs), profile.model ?? model);
}

/**
 * Counts a text's tokens with the server's `/tokenize`: vLLM's and SGLang's take `prompt` and
 * answer `count`, llama.cpp's take `content` and answer `tokens`. The body that works is kept;
 * a server with neither (Ollama) is not asked again.
 */
async function countTokens(http: UpstreamHttp, profile: LlmServerProfile, model: string, text: string, timeoutMs: number): Promise<number | undefined> {
  const tries = profile.tokenizer === null ? (['prompt', 'content'] as const) : profile.tokenizer === 'none' ? [] : [profile.tokenizer];
  for (const field of tries) {
    const answer = (await http.postJson('/tokenize', field === 'prompt' ? { model, prompt: text } : { content: text }, timeoutMs)) as
      | { count?: unknown; tokens?: unknown }
      | undefined;
    const count = typeof answer?.count === 'number' ? answer.count : Array.isArray(answer?.tokens) ? answer.tokens.length : undefined;
    if (count !== undefined) {
      profile.tokenizer = field;
      return count;
    }
  }
  if (profile.tokenizer === null) profile.tokenizer = 'none';
  return undefined;
}
