import { randomBytes } from 'node:crypto';
import type { ChatRequestBody } from './messages.js';
import { splitWords } from './messages.js';

/** Timing and failure modifiers an answer can carry; given alone, they apply to the default reply. */
export type ReplyModifiers = {
  /** Wait this long before the first byte: a slow model. */
  delayMs?: number;
  /** Pause between streamed pieces; the behaviour's `pieceDelayMs` when absent. */
  pieceDelayMs?: number;
  /** Destroy the socket after this many streamed pieces (a non-streamed body is cut in half instead). */
  cutAfterPieces?: number;
  /** The usage to report instead of the word counts of the messages and the answer. */
  usage?: { prompt_tokens: number; completion_tokens: number };
};

/** A text answer; it streams as `pieces` (which should join to `content`), word by word by default. */
export type ContentReply = ReplyModifiers & {
  content: string;
  pieces?: string[];
  finishReason?: 'stop' | 'length' | 'content_filter';
};

/** One tool call the model makes; object arguments are sent as their JSON. */
export type FakeToolCall = { name: string; arguments: object | string; id?: string };

/** The model calls tools (finish_reason `tool_calls`), optionally saying something first. */
export type ToolCallsReply = ReplyModifiers & { toolCalls: FakeToolCall[]; content?: string };

/** An HTTP error with an OpenAI error body. */
export type ErrorReply = {
  error: { status: number; message: string; type?: string; code?: string };
  delayMs?: number;
};

/** No answer at all until the client goes away. */
export type HangReply = { hang: true };

/** What the fake LLM answers to one chat request. */
export type ReplySpec = ContentReply | ToolCallsReply | ErrorReply | HangReply | ReplyModifiers;

/** A reply, or a function of the request body that returns one. */
export type ReplySource = ReplySpec | ((request: ChatRequestBody) => ReplySpec);

/** A tool call ready to send: with its id, arguments as a JSON string. */
export type PlannedToolCall = { id: string; name: string; arguments: string };

/** An answer reduced to what the server writes. */
export type AnswerPlan = {
  kind: 'answer';
  delayMs: number;
  pieceDelayMs: number;
  cutAfterPieces: number | undefined;
  content: string | null;
  contentPieces: string[];
  toolCalls: PlannedToolCall[];
  finishReason: string;
  /** Scripted usage (see `ReplyModifiers`); absent: counted from the words. */
  usage?: { prompt_tokens: number; completion_tokens: number };
};

/** A reply reduced to what the server writes. */
export type ReplyPlan =
  | { kind: 'error'; delayMs: number; status: number; message: string; type: string | undefined; code: string | null }
  | { kind: 'hang' }
  | AnswerPlan;

/** The reply a source gives for a request. */
export function resolveReply(source: ReplySource, request: ChatRequestBody): ReplySpec {
  return typeof source === 'function' ? source(request) : source;
}

/** Whether a spec only carries modifiers, so it needs a base answer to modify. */
export function isModifiersOnly(spec: ReplySpec): spec is ReplyModifiers {
  return !('content' in spec) && !('toolCalls' in spec) && !('error' in spec) && !('hang' in spec);
}

/** The spec itself, or `base` with the spec's modifiers applied when the spec only carries modifiers. */
export function withBase(spec: ReplySpec, base: ReplySpec): ReplySpec {
  if (!isModifiersOnly(spec)) return spec;
  const defined = Object.entries(spec).filter(([, value]) => value !== undefined);
  return { ...base, ...Object.fromEntries(defined) } as ReplySpec;
}

/** Reduces a complete spec (not modifiers only) to what the server writes. */
export function planReply(spec: ReplySpec, defaultPieceDelayMs: number): ReplyPlan {
  if ('hang' in spec) return { kind: 'hang' };
  if ('error' in spec) return planError(spec);
  return planAnswer(spec, defaultPieceDelayMs);
}

function planError(spec: ErrorReply): ReplyPlan {
  const { status, message, type, code } = spec.error;
  return { kind: 'error', delayMs: milliseconds(spec.delayMs), status, message, type, code: code ?? null };
}

function planAnswer(spec: ContentReply | ToolCallsReply | ReplyModifiers, defaultPieceDelayMs: number): AnswerPlan {
  const toolCalls = 'toolCalls' in spec ? spec.toolCalls.map(planToolCall) : [];
  const content = 'content' in spec && spec.content !== undefined ? spec.content : null;
  const pieces = 'pieces' in spec && spec.pieces !== undefined ? spec.pieces : splitWords(content ?? '');
  const finishReason = toolCalls.length > 0 ? 'tool_calls' : ('finishReason' in spec && spec.finishReason) || 'stop';
  return {
    kind: 'answer',
    delayMs: milliseconds(spec.delayMs),
    pieceDelayMs: milliseconds(spec.pieceDelayMs ?? defaultPieceDelayMs),
    cutAfterPieces: spec.cutAfterPieces === undefined ? undefined : Math.max(0, Math.floor(spec.cutAfterPieces)),
    content: content ?? (toolCalls.length > 0 ? null : ''),
    contentPieces: pieces,
    toolCalls,
    finishReason,
    ...(spec.usage ? { usage: spec.usage } : {}),
  };
}

function planToolCall(call: FakeToolCall): PlannedToolCall {
  const args = typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments);
  return { id: call.id ?? `call_${randomBytes(12).toString('hex')}`, name: call.name, arguments: args };
}

function milliseconds(value: number | undefined): number {
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : 0;
}
