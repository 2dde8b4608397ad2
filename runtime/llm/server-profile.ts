import type { TemplateRules } from './chat-template-shape.js';
import type { ReasoningShape, ReplyObservations, ToolCallShape } from './reply-normalizer.js';
import { TOOL_CALL_FORMATS, type ToolCallFormat } from './tool-call-markup.js';

/** How the service treats its LLM server where it cannot tell by itself (`llm.*`). */
export type ServerSettings = {
  /** The model's context window in tokens; 0: learnt from the server. */
  contextWindow: number;
  /** Tool calls read out of a reply's text: any format (`auto`), none, or one. */
  toolCallParser: 'auto' | 'none' | ToolCallFormat;
  /** Whether roles must alternate: learnt from the template's error (`auto`), or set. */
  alternateRoles: 'auto' | 'always' | 'never';
};

/** Where the context window came from. */
export type WindowSource = 'config' | 'max_model_len' | 'n_ctx' | 'ollama_context_length' | 'error';

/** What `/health` shows of the LLM server: what the service learnt of it. */
export type ServerReport = {
  model: string | null;
  context_window: number | null;
  context_window_source: WindowSource | null;
  /** Whether streamed replies carry usage when asked; null until a streamed reply was read. */
  streams_usage: boolean | null;
  reasoning: ReasoningShape[];
  tool_calls: ToolCallShape[];
  alternate_roles: boolean;
  system_role: boolean;
  /** The server parses no tool calls: tools are described in the prompt and calls read from the text. */
  tools_in_prompt: boolean;
  /** The server's `/tokenize`, when it has one, counts replies it sent no usage for. */
  tokenize: boolean | null;
};

/** The least and most a learnt token scale may be (the estimate's error either way). */
const SCALE_BOUNDS = [0.5, 4] as const;

/**
 * What the service knows of its LLM server: set, or learnt from its answers. Its context window
 * (`max_model_len` in vLLM's and SGLang's `/v1/models`, llama.cpp's `/props` `n_ctx`, Ollama's
 * `/api/ps` `context_length`), whether its chat template wants roles to alternate or has a
 * system role (learnt once from its error), whether it parses tool calls, where it puts
 * reasoning, and how its token counts compare with the service's estimate. One per LLM client.
 */
export class LlmServerProfile {
  model: string | null = null;
  private window: { tokens: number; source: WindowSource } | null;
  streamsUsage: boolean | null = null;
  private readonly reasoning = new Set<ReasoningShape>();
  private readonly toolCalls = new Set<ToolCallShape>();
  private alternate: boolean;
  systemRole = true;
  /** False once the server refused tools (no tool-call parser). */
  nativeTools = true;
  /** The model's template opens its think tag itself (DeepSeek-R1): replies begin in reasoning. */
  implicitThinkOpen = false;
  /** The server's `/tokenize` body: `prompt` (vLLM, SGLang), `content` (llama.cpp), none, or not known yet. */
  tokenizer: 'prompt' | 'content' | 'none' | null = null;
  /** The server's prompt token counts over the service's estimate: the estimate is scaled by it. */
  tokenScale = 1;

  constructor(private readonly settings: ServerSettings) {
    this.window = settings.contextWindow > 0 ? { tokens: settings.contextWindow, source: 'config' } : null;
    this.alternate = settings.alternateRoles === 'always';
  }

  /** The context window in tokens, once known. */
  get contextWindow(): number | undefined {
    return this.window?.tokens;
  }

  /** What the chat template requires. */
  get templateRules(): TemplateRules {
    return { alternateRoles: this.alternate, systemRole: this.systemRole };
  }

  /** The tool-call formats read out of replies' text. */
  get toolFormats(): readonly ToolCallFormat[] {
    const setting = this.settings.toolCallParser;
    return setting === 'auto' ? TOOL_CALL_FORMATS : setting === 'none' ? [] : [setting];
  }

  /** Whether the next reply begins in reasoning: the template opens the tag and no parser takes it out. */
  get startsInReasoning(): boolean {
    return this.implicitThinkOpen && !this.reasoning.has('reasoning') && !this.reasoning.has('reasoning_content');
  }

  /** Learns from an error what the template requires; true when this is new, and the call is worth making again. */
  learnTemplate(kind: 'roles_must_alternate' | 'system_role_unsupported'): boolean {
    if (kind === 'roles_must_alternate') {
      if (this.alternate || this.settings.alternateRoles !== 'auto') return false;
      this.alternate = true;
      return true;
    }
    if (!this.systemRole) return false;
    this.systemRole = false;
    this.alternate ||= this.settings.alternateRoles !== 'never';
    return true;
  }

  /** Learns that the server parses no tool calls; true when this is new. */
  learnNoNativeTools(): boolean {
    if (!this.nativeTools || this.settings.toolCallParser === 'none') return false;
    this.nativeTools = false;
    return true;
  }

  /** Takes the server's context window, unless one is set; true when it changed. */
  learnWindow(tokens: number, source: Exclude<WindowSource, 'config'>): boolean {
    if (this.window?.source === 'config' || !Number.isInteger(tokens) || tokens <= 0 || this.window?.tokens === tokens) return false;
    this.window = { tokens, source };
    return true;
  }

  /** Scales the estimate up after the server refused a prompt the estimate fitted; false when it is at its most already. */
  learnTighterFit(): boolean {
    if (this.tokenScale >= SCALE_BOUNDS[1]) return false;
    this.tokenScale = Math.min(SCALE_BOUNDS[1], this.tokenScale * 1.25);
    return true;
  }

  /** Compares the server's count of a prompt with the estimate, leaning to the larger (too little room costs a failed call). */
  learnTokenScale(serverTokens: number, estimated: number): void {
    if (!(serverTokens > 0 && estimated > 0)) return;
    const observed = Math.min(SCALE_BOUNDS[1], Math.max(SCALE_BOUNDS[0], serverTokens / estimated));
    this.tokenScale = Math.max(observed, 0.8 * this.tokenScale + 0.2 * observed);
  }

  /** What a reply showed: where its reasoning and tool calls were, and whether its template opened a think tag. */
  observe(observed: ReplyObservations): void {
    for (const shape of observed.reasoning) this.reasoning.add(shape);
    for (const shape of observed.toolCalls) this.toolCalls.add(shape);
    if (observed.implicitThinkOpen) this.implicitThinkOpen = true;
  }

  /** vLLM's and SGLang's `/v1/models`: the first model's id and its `max_model_len`. */
  observeModels(body: unknown): void {
    const first = (body as { data?: unknown } | null)?.data;
    const model = Array.isArray(first) ? (first[0] as { id?: unknown; max_model_len?: unknown } | undefined) : undefined;
    if (typeof model?.id === 'string') this.model = model.id;
    if (typeof model?.max_model_len === 'number') this.learnWindow(model.max_model_len, 'max_model_len');
  }

  /** llama.cpp's `/props`: the context of a slot (`default_generation_settings.n_ctx`, or `n_ctx` in older builds). */
  observeProps(body: unknown): void {
    const props = body as { default_generation_settings?: { n_ctx?: unknown }; n_ctx?: unknown } | null;
    const nCtx = props?.default_generation_settings?.n_ctx ?? props?.n_ctx;
    if (typeof nCtx === 'number') this.learnWindow(nCtx, 'n_ctx');
  }

  /** Ollama's `/api/ps`: the running model's `context_length` (the one named `model`, else the first). */
  observeOllamaModels(body: unknown, model: string): void {
    const models = (body as { models?: unknown } | null)?.models;
    if (!Array.isArray(models)) return;
    const entries = models as Array<{ name?: unknown; model?: unknown; context_length?: unknown }>;
    const running = entries.find((entry) => entry.name === model || entry.model === model) ?? entries[0];
    if (typeof running?.context_length === 'number') this.learnWindow(running.context_length, 'ollama_context_length');
  }

  /** The profile as `/health` shows it. */
  report(): ServerReport {
    return {
      model: this.model,
      context_window: this.window?.tokens ?? null,
      context_window_source: this.window?.source ?? null,
      streams_usage: this.streamsUsage,
      reasoning: [...this.reasoning],
      tool_calls: [...this.toolCalls],
      alternate_roles: this.alternate,
      system_role: this.systemRole,
      tools_in_prompt: !this.nativeTools,
      tokenize: this.tokenizer === null ? null : this.tokenizer !== 'none',
    };
  }
}
