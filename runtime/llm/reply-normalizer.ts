import type { ToolCall, Usage } from '../chat-types.js';
import { ThinkTagSplitter, type TextPiece } from './think-tags.js';
import { newToolCallId, ToolCallAssembler, type ToolCallDelta, type ToolCallRepair } from './tool-call-assembler.js';
import { ToolCallMarkupReader, type MarkupRead, type ToolCallFormat } from './tool-call-markup.js';
import { LlmCallError } from './upstream-errors.js';

/** Where a server put a reply's reasoning. */
export type ReasoningShape = 'reasoning_content' | 'reasoning' | 'think_tags';

/** How a server sent a reply's tool calls: as tool calls, or as text in one of the formats. */
export type ToolCallShape = 'native' | ToolCallFormat;

/** What one reply showed of its server's ways, for the server's profile and the call's record. */
export type ReplyObservations = {
  reasoning: Set<ReasoningShape>;
  toolCalls: Set<ToolCallShape>;
  /** The reply closed a think tag its template opened. */
  implicitThinkOpen: boolean;
  /** What had to be mended or made, by name (see `ReplyNormalizer`). */
  repairs: Set<string>;
};

/** Where the normalised pieces of a streamed reply go. */
export type ReplySink = {
  onContent?: (piece: string) => void;
  onReasoning?: (piece: string) => void;
  onToolCallDelta?: (delta: ToolCallDelta) => void;
};

/** How one reply is read. */
export type NormalizerOptions = ReplySink & {
  /** The tool-call formats read out of the reply's text (none when no tools were offered). */
  toolFormats: readonly ToolCallFormat[];
  /** The model's template opens its think tag: the reply begins in reasoning. */
  startsInReasoning: boolean;
  /** Most characters of reasoning, text and tool-call arguments taken before the reply is cut. */
  maxChars: number;
};

/** A reply in one clean shape, whatever the server sent. */
export type NormalizedReply = {
  content: string;
  reasoning: string;
  toolCalls: ToolCall[];
  /** The server's finish reason (mended), or null when it gave none. */
  finishReason: string | null;
  usage: Usage | null;
  /** The reply was cut at `maxChars`. */
  cut: boolean;
  /** The completion's `id` and `model`, as the server sent them (null: it did not). */
  id: string | null;
  model: string | null;
  observed: ReplyObservations;
};

/**
 * Turns what a server sends for one reply, streamed deltas or a whole message, into one shape:
 * reasoning from `reasoning_content`, `reasoning` or `<think>` tags, never in the text; tool
 * calls the server left as text read out of it; streamed tool calls mended (see
 * `ToolCallAssembler`); a missing `tool_calls` finish reason inferred; usage in OpenAI's shape,
 * from llama.cpp's `timings` when that is all there is; and a reply longer than `maxChars`
 * cut and marked `length`. Pieces go to the sink as they come.
 */
export class ReplyNormalizer {
  private readonly splitter: ThinkTagSplitter;
  private readonly markup: ToolCallMarkupReader;
  private readonly calls = new ToolCallAssembler();
  private content = '';
  private reasoning = '';
  private chars = 0;
  private cut = false;
  private finish: string | null = null;
  private usage: Usage | null = null;
  private id: string | null = null;
  private model: string | null = null;
  private readonly observed: ReplyObservations = { reasoning: new Set(), toolCalls: new Set(), implicitThinkOpen: false, repairs: new Set() };

  constructor(private readonly options: NormalizerOptions) {
    this.splitter = new ThinkTagSplitter(options.startsInReasoning);
    this.markup = new ToolCallMarkupReader(options.toolFormats);
  }

  /** True once the reply reached `maxChars`: what follows is not read. */
  get isCut(): boolean {
    return this.cut;
  }

  /** One streamed chunk: its first choice's delta and finish reason, and its usage or timings. */
  chunk(chunk: { choices?: unknown; usage?: unknown; timings?: unknown; id?: unknown; model?: unknown }): void {
    if (this.id === null) this.takeNames(chunk);
    if (chunk.usage !== undefined && chunk.usage !== null) this.takeUsage(chunk.usage);
    else if (chunk.timings !== undefined && this.usage === null) this.takeTimings(chunk.timings);
    const choice = Array.isArray(chunk.choices) ? (chunk.choices[0] as { delta?: unknown; finish_reason?: unknown } | undefined) : undefined;
    if (!choice || this.cut) return;
    const delta = choice.delta;
    if (delta !== null && typeof delta === 'object') this.delta(delta as Record<string, unknown>);
    if (typeof choice.finish_reason === 'string' && choice.finish_reason !== '') this.finish = choice.finish_reason;
  }

  /** A whole (non-streamed) completion body. */
  completion(body: { choices?: unknown; usage?: unknown; timings?: unknown; id?: unknown; model?: unknown }): void {
    this.takeNames(body);
    if (body.usage !== undefined && body.usage !== null) this.takeUsage(body.usage);
    else if (body.timings !== undefined) this.takeTimings(body.timings);
    const choice = Array.isArray(body.choices) ? (body.choices[0] as { message?: unknown; finish_reason?: unknown } | undefined) : undefined;
    if (!choice || choice.message === null || typeof choice.message !== 'object') throw new LlmCallError('the LLM server returned no choices');
    const message = choice.message as Record<string, unknown>;
    this.takeReasoning(message);
    this.takeContent(message.content);
    const entries = message.tool_calls;
    if (entries !== undefined && entries !== null && !Array.isArray(entries)) throw new LlmCallError('the LLM server sent tool_calls that are not a list');
    for (const entry of (entries as unknown[] | null | undefined) ?? []) {
      // A whole message's calls are each complete: their indexes (SGLang sends -1) say nothing.
      const { id, function: fn } = (entry ?? {}) as { id?: unknown; function?: { name?: unknown; arguments?: unknown } | null };
      if (fn === null || typeof fn !== 'object' || typeof fn.name !== 'string' || fn.name === '') {
        throw new LlmCallError(`the LLM server sent a malformed tool call: ${JSON.stringify(entry)?.slice(0, 200)}`);
      }
      const args = typeof fn.arguments === 'string' ? fn.arguments : fn.arguments === undefined || fn.arguments === null ? '' : JSON.stringify(fn.arguments);
      if (fn.arguments !== null && typeof fn.arguments === 'object') this.calls.repairs.add('arguments_object');
      this.observed.toolCalls.add('native');
      this.calls.addWhole({ ...(typeof id === 'string' && id !== '' ? { id } : {}), name: fn.name, arguments: args });
    }
    if (typeof choice.finish_reason === 'string' && choice.finish_reason !== '') this.finish = choice.finish_reason;
  }

  /** The reply, once the server has sent all of it. */
  result(): NormalizedReply {
    this.takePieces(this.splitter.end());
    this.takeMarkup(this.markup.end());
    const toolCalls = this.calls.result();
    let finishReason = this.cut ? 'length' : this.finish;
    if (toolCalls.length > 0 && (finishReason === 'stop' || finishReason === null) && !this.cut) {
      if (finishReason === 'stop' && this.observed.toolCalls.has('native')) this.observed.repairs.add('finish_reason');
      finishReason = 'tool_calls';
    }
    for (const repair of this.calls.repairs) this.observed.repairs.add(toolCallRepairName(repair));
    for (const shape of this.observed.toolCalls) if (shape !== 'native') this.observed.repairs.add(`tool_calls_from_text:${shape}`);
    if (this.observed.reasoning.has('think_tags')) this.observed.repairs.add('reasoning_from_think_tags');
    if (this.splitter.reclassified) this.observed.repairs.add('unclosed_think_tag');
    this.observed.implicitThinkOpen = this.splitter.sawImplicitOpen;
    return { content: this.content, reasoning: this.reasoning, toolCalls, finishReason, usage: this.usage, cut: this.cut, observed: this.observed, id: this.id, model: this.model };
  }

  /** The completion's id and model, from its body or its first chunk that names them. */
  private takeNames(body: { id?: unknown; model?: unknown }): void {
    if (typeof body.id === 'string' && body.id !== '') this.id = body.id;
    if (typeof body.model === 'string' && body.model !== '') this.model = body.model;
  }

  private delta(delta: Record<string, unknown>): void {
    this.takeReasoning(delta);
    this.takeContent(delta.content);
    const entries = delta.tool_calls;
    if (entries === undefined || entries === null) return;
    if (!Array.isArray(entries)) throw new LlmCallError('the LLM server sent tool_calls that are not a list');
    for (const entry of entries) {
      if (this.cut) return;
      this.observed.toolCalls.add('native');
      const piece = this.calls.add(entry);
      const args = piece.function?.arguments;
      if (args !== undefined && !this.reserve(args.length)) return;
      this.options.onToolCallDelta?.(piece);
    }
  }

  /**
   * The reasoning of a delta or message: vLLM from 0.16 and Ollama send `reasoning`, SGLang,
   * llama.cpp and older vLLM `reasoning_content`; vLLM 0.11.1 to 0.15 send both, alike.
   */
  private takeReasoning(fields: Record<string, unknown>): void {
    const { reasoning, reasoning_content: legacy } = fields;
    if (typeof reasoning === 'string' && reasoning !== '') {
      this.observed.reasoning.add('reasoning');
      this.addReasoning(reasoning);
    } else if (typeof legacy === 'string' && legacy !== '') {
      this.observed.reasoning.add('reasoning_content');
      this.addReasoning(legacy);
    }
  }

  private takeContent(content: unknown): void {
    let text: string | undefined;
    if (typeof content === 'string') text = content;
    else if (Array.isArray(content)) text = content.map((part: { text?: unknown }) => (typeof part?.text === 'string' ? part.text : '')).join('');
    if (text === undefined || text === '' || this.cut) return;
    this.takePieces(this.splitter.push(text));
  }

  private takePieces(pieces: TextPiece[]): void {
    for (const piece of pieces) {
      if (piece.kind === 'reasoning') {
        this.observed.reasoning.add('think_tags');
        this.addReasoning(piece.text);
      } else {
        this.takeMarkup(this.markup.push(piece.text));
      }
    }
  }

  private takeMarkup(read: MarkupRead): void {
    if (read.content !== '') this.addContent(read.content);
    for (const call of read.calls) {
      if (this.cut) return;
      this.observed.toolCalls.add(call.format);
      // A call written as text has no id but the model's own (Mistral's): it gets one, as OpenAI's calls have.
      const piece = this.calls.addWhole({ name: call.name, arguments: call.arguments, id: call.id ?? newToolCallId() });
      this.options.onToolCallDelta?.(piece);
    }
  }

  private addReasoning(text: string): void {
    const kept = this.within(text);
    if (kept === '') return;
    this.reasoning += kept;
    this.options.onReasoning?.(kept);
  }

  private addContent(text: string): void {
    // The blank lines a server leaves between the reasoning and the reply are not the reply's.
    const kept = this.within(this.content === '' && this.reasoning !== '' ? text.trimStart() : text);
    if (kept === '') return;
    this.content += kept;
    this.options.onContent?.(kept);
  }

  /** The part of `text` within the reply's bound; past it the reply is cut. */
  private within(text: string): string {
    if (this.cut) return '';
    const room = this.options.maxChars - this.chars;
    if (text.length <= room) {
      this.chars += text.length;
      return text;
    }
    this.cut = true;
    this.chars = this.options.maxChars;
    return text.slice(0, Math.max(0, room));
  }

  /** Counts `length` more characters against the bound; false (and the reply cut) past it. */
  private reserve(length: number): boolean {
    if (this.chars + length <= this.options.maxChars) {
      this.chars += length;
      return true;
    }
    this.cut = true;
    return false;
  }

  /** OpenAI's usage, with the reasoning tokens where the server counts them (vLLM's details, SGLang's own field). */
  private takeUsage(raw: unknown): void {
    const usage = raw as { prompt_tokens?: unknown; completion_tokens?: unknown; total_tokens?: unknown; reasoning_tokens?: unknown; completion_tokens_details?: { reasoning_tokens?: unknown } | null };
    if (typeof usage.prompt_tokens !== 'number' || typeof usage.completion_tokens !== 'number') return;
    const total = typeof usage.total_tokens === 'number' ? usage.total_tokens : usage.prompt_tokens + usage.completion_tokens;
    const reasoning = usage.completion_tokens_details?.reasoning_tokens ?? usage.reasoning_tokens;
    this.usage = {
      prompt_tokens: usage.prompt_tokens,
      completion_tokens: usage.completion_tokens,
      total_tokens: total,
      ...(typeof reasoning === 'number' && reasoning > 0 ? { reasoning_tokens: reasoning } : {}),
    };
  }

  /** llama.cpp's `timings` (`cache_n` and `prompt_n` read, `predicted_n` made), when it sent no usage. */
  private takeTimings(raw: unknown): void {
    const timings = raw as { cache_n?: unknown; prompt_n?: unknown; predicted_n?: unknown } | null;
    if (!timings || typeof timings.prompt_n !== 'number' || typeof timings.predicted_n !== 'number') return;
    const prompt = timings.prompt_n + (typeof timings.cache_n === 'number' ? timings.cache_n : 0);
    this.usage = { prompt_tokens: prompt, completion_tokens: timings.predicted_n, total_tokens: prompt + timings.predicted_n };
    this.observed.repairs.add('usage_from_timings');
  }
}

function toolCallRepairName(repair: ToolCallRepair): string {
  return repair === 'index' ? 'tool_call_index' : repair === 'id' ? 'tool_call_id' : 'tool_call_arguments_object';
}
