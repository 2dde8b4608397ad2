import { errors as undiciErrors } from 'undici';

/** Why an LLM call failed, when the service treats it otherwise than as a failed call. */
export type LlmFailureCode = 'context_length_exceeded';

/** An LLM call that failed; the message is the description the specification puts in replies. */
export class LlmCallError extends Error {
  override readonly name = 'LlmCallError';
  /** Set when the failure is the request's own: it does not fit the model's context window. */
  readonly code: LlmFailureCode | undefined;
  /** The HTTP status the server answered with, when it answered one. */
  readonly status: number | undefined;

  constructor(message: string, options: { cause?: unknown; code?: LlmFailureCode; status?: number } = {}) {
    super(message, { cause: options.cause });
    this.code = options.code;
    this.status = options.status;
  }
}

/**
 * What an error the LLM server answered with says: its text, its `type` when it has one, and the
 * context window when it names one (a server behind a proxy that hides where it tells it).
 */
export type UpstreamError = { status: number; message: string; type: string | undefined; contextWindow?: number };

/** The window in the servers' context-length texts (vLLM's, SGLang's, llama.cpp's newer one). */
const WINDOW_IN_TEXT = [
  /maximum context length is (\d+) tokens/i,
  /model's context length \((\d+) tokens\)/i,
  /maximum context length of (\d+) tokens/i,
  /context length is only (\d+) tokens/i,
  /available context size \((\d+) tokens\)/i,
];

/** The context window an error names: in its text, or llama.cpp's `n_ctx` field. */
function windowOf(message: string, nCtx: unknown): number | undefined {
  if (typeof nCtx === 'number' && Number.isInteger(nCtx) && nCtx > 0) return nCtx;
  for (const pattern of WINDOW_IN_TEXT) {
    const found = pattern.exec(message)?.[1];
    if (found !== undefined) return Number(found);
  }
  return undefined;
}

/**
 * What an error answer tells the service to do: the request does not fit the context window
 * (`context_length`); the model's chat template wants roles to alternate, or has no system role
 * (learnt, and the call made again in the shape it wants); the server parses no tool calls
 * (vLLM without `--enable-auto-tool-choice`, llama.cpp without `--jinja`, an Ollama model
 * without tools: the tools go in the prompt instead); or nothing of the kind (`other`).
 */
export type UpstreamErrorKind = 'context_length' | 'roles_must_alternate' | 'system_role_unsupported' | 'no_native_tools' | 'other';

/**
 * The servers' context-length texts: vLLM's four generations ("This model's maximum context
 * length is …", "'max_tokens' … is too large", "… resulting in a maximum input length …",
 * "The decoder prompt (length N) is longer than the maximum model length"), SGLang's ("The
 * input (N tokens) is longer than the model's context length", "Requested token count exceeds
 * the model's maximum context length"), llama.cpp's ("the request exceeds the available
 * context size", type `exceed_context_size_error`), Ollama's ("the prompt is longer than the
 * context length currently available to the model", "input length (N tokens) exceeds the
 * model's maximum context length").
 */
const CONTEXT_LENGTH =
  /maximum context length|context length is only|longer than the model's context length|longer than the maximum model length|exceeds the available context size|longer than the context length|maximum input length/i;

const ROLES_MUST_ALTERNATE = /roles must alternate/i;
const SYSTEM_ROLE_UNSUPPORTED = /system role (?:is )?not supported/i;
const NO_NATIVE_TOOLS = /--enable-auto-tool-choice|--tool-call-parser|tools param requires --jinja|does not support tools/i;

/** Sorts an error the LLM server answered with (see `UpstreamErrorKind`). */
export function classifyUpstreamError(error: UpstreamError): UpstreamErrorKind {
  if (error.type === 'exceed_context_size_error' || CONTEXT_LENGTH.test(error.message)) return 'context_length';
  if (ROLES_MUST_ALTERNATE.test(error.message)) return 'roles_must_alternate';
  if (SYSTEM_ROLE_UNSUPPORTED.test(error.message)) return 'system_role_unsupported';
  if (NO_NATIVE_TOOLS.test(error.message)) return 'no_native_tools';
  return 'other';
}

/**
 * The error of an answer's body: OpenAI's `{"error": {...}}` (vLLM from 0.10.1, llama.cpp,
 * Ollama), the flat `{"object": "error", "message": ...}` (SGLang, older vLLM), `{"error": "..."}`,
 * or a short piece of whatever the server sent.
 */
export function upstreamErrorOf(status: number, text: string): UpstreamError {
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown; type?: unknown; n_ctx?: unknown } | string; message?: unknown; type?: unknown };
    const inner = typeof parsed.error === 'object' && parsed.error !== null ? parsed.error : undefined;
    const message = typeof parsed.error === 'string' ? parsed.error : typeof inner?.message === 'string' ? inner.message : typeof parsed.message === 'string' ? parsed.message : undefined;
    const type = typeof inner?.type === 'string' ? inner.type : typeof parsed.type === 'string' ? parsed.type : undefined;
    if (message !== undefined) {
      const contextWindow = windowOf(message, inner?.n_ctx);
      return { status, message, type, ...(contextWindow === undefined ? {} : { contextWindow }) };
    }
  } catch {
    // not JSON: fall through
  }
  return { status, message: text.trim().slice(0, 200) || 'error from the LLM server', type: undefined };
}

/** The failure of an error answer (status 0: one sent mid-stream): a context-length one carries its code, the others the status and the server's text. */
export function upstreamFailure(error: UpstreamError): LlmCallError {
  if (classifyUpstreamError(error) === 'context_length') {
    return new LlmCallError(`the conversation does not fit the model's context window: ${error.message}`, { code: 'context_length_exceeded' });
  }
  return error.status > 0 ? new LlmCallError(`${error.status} ${error.message}`, { status: error.status }) : new LlmCallError(error.message);
}

/** A short description of why an LLM call failed, without stack or secrets. */
export function describeFailure(error: unknown, callerSignal: AbortSignal | undefined, timedOut: boolean): string {
  if (callerSignal?.aborted) return 'the request was cancelled';
  if (timedOut || error instanceof undiciErrors.HeadersTimeoutError || error instanceof undiciErrors.BodyTimeoutError) {
    return 'the LLM server did not answer in time';
  }
  const code = connectionErrorCode(error);
  if (code && /^(ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ETIMEDOUT|UND_ERR_CONNECT_TIMEOUT)$/.test(code)) {
    return `cannot reach the LLM server (${code})`;
  }
  if (code && BROKEN_CONNECTION.test(code)) return `the connection to the LLM server broke (${code})`;
  if (error instanceof SyntaxError) return 'the LLM server sent a reply that is not valid JSON';
  return error instanceof Error ? error.message : String(error);
}

/** Codes of a connection that broke under a request. */
const BROKEN_CONNECTION = /^(ECONNRESET|EPIPE|UND_ERR_SOCKET|UND_ERR_CLOSED)$/;

/** The system or undici code of a failed request, if it has one. */
export function connectionErrorCode(error: unknown): string | undefined {
  const fields = error as { code?: unknown; cause?: { code?: unknown } } | null;
  const code = fields?.code ?? fields?.cause?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * Whether a request failed on a connection that broke before any answer came: a kept-alive
 * connection the server had just closed (its idle time-out met the request on the way). No
 * answer began, so nothing of the call reached the client.
 */
export function isBrokenBeforeAnswer(error: unknown): boolean {
  const code = connectionErrorCode(error);
  return code !== undefined && BROKEN_CONNECTION.test(code);
}
