import { randomBytes } from 'node:crypto';
import type { FakeMessage } from './messages.js';
import { countWords, splitEvery, textOf } from './messages.js';
import type { AnswerPlan } from './reply-spec.js';

/** Token counts, in the OpenAI usage shape. */
export type Usage = { prompt_tokens: number; completion_tokens: number; total_tokens: number };

/** The identity one completion shares between its body or all its chunks. */
export type CompletionMeta = { id: string; created: number; model: string };

/** One streamed delta of the assistant message. */
export type Delta = Record<string, unknown>;

/** The frame that ends an OpenAI stream. */
export const SSE_DONE = 'data: [DONE]\n\n';

const ARGUMENT_PIECE_CHARS = 8;

// A random prefix per process and a counter: unique ids without drawing random bytes per request.
const ID_PREFIX = `chatcmpl-${randomBytes(6).toString('hex')}`;
let idCounter = 0;

/** A fresh completion identity (`chatcmpl-...`, now, the model named by the request). */
export function completionMeta(model: string): CompletionMeta {
  idCounter += 1;
  return { id: `${ID_PREFIX}${idCounter.toString(36).padStart(6, '0')}`, created: unixSeconds(), model };
}

/** The current time in Unix seconds, as OpenAI's `created` fields have it. */
export function unixSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/** One server-sent event frame carrying JSON. */
export function sseFrame(value: unknown): string {
  return `data: ${JSON.stringify(value)}\n\n`;
}

/** Rough usage from word counts: the prompt's message texts and the answer's text and tool calls. */
export function usageOf(messages: FakeMessage[], plan: AnswerPlan): Usage {
  if (plan.usage) return { ...plan.usage, total_tokens: plan.usage.prompt_tokens + plan.usage.completion_tokens };
  const prompt = messages.reduce((sum, message) => sum + countWords(textOf(message.content)), 0);
  const calls = plan.toolCalls.reduce((sum, call) => sum + 1 + countWords(call.arguments), 0);
  const completion = countWords(plan.content ?? '') + calls;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** A non-streamed `chat.completion` body. */
export function completionBody(meta: CompletionMeta, plan: AnswerPlan, usage: Usage): unknown {
  const message: Record<string, unknown> = { role: 'assistant', content: plan.content, refusal: null };
  if (plan.toolCalls.length > 0) {
    message.tool_calls = plan.toolCalls.map((call) => ({
      id: call.id,
      type: 'function',
      function: { name: call.name, arguments: call.arguments },
    }));
  }
  const choice = { index: 0, message, logprobs: null, finish_reason: plan.finishReason };
  return { ...meta, object: 'chat.completion', system_fingerprint: null, choices: [choice], usage };
}

/**
 * The deltas an answer streams as, after the opening role delta: its content pieces, then per tool
 * call a delta with index, id, type and name, then its arguments in pieces.
 */
export function streamDeltas(plan: AnswerPlan): Delta[] {
  const deltas: Delta[] = plan.contentPieces.map((piece) => ({ content: piece }));
  plan.toolCalls.forEach((call, index) => {
    const head = { index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } };
    deltas.push({ tool_calls: [head] });
    for (const piece of splitEvery(call.arguments, ARGUMENT_PIECE_CHARS)) {
      deltas.push({ tool_calls: [{ index, function: { arguments: piece } }] });
    }
  });
  return deltas;
}

/** The opening delta of a streamed answer. */
export function openingDelta(plan: AnswerPlan): Delta {
  return { role: 'assistant', content: plan.toolCalls.length > 0 && plan.contentPieces.length === 0 ? null : '' };
}

/** A `chat.completion.chunk` with one choice; `usage: null` is present when usage was asked for. */
export function chunkBody(meta: CompletionMeta, delta: Delta, finishReason: string | null, withUsage: boolean): unknown {
  const choice = { index: 0, delta, logprobs: null, finish_reason: finishReason };
  const chunk = { ...meta, object: 'chat.completion.chunk', system_fingerprint: null, choices: [choice] };
  return withUsage ? { ...chunk, usage: null } : chunk;
}

/**
 * Writes the SSE frames of one stream's chunks, exactly `sseFrame(chunkBody(...))`: the parts that
 * never change within a stream are serialised once, as most of each frame's cost was there.
 */
export function chunkFramer(meta: CompletionMeta, withUsage: boolean): (delta: Delta, finishReason?: string | null) => string {
  // A 0 placeholder for the delta; `"delta":` cannot occur unescaped inside the id or model strings.
  const template = JSON.stringify(chunkBody(meta, 0 as unknown as Delta, null, withUsage));
  const at = template.lastIndexOf('"delta":0') + '"delta":'.length;
  const head = `data: ${template.slice(0, at)}`;
  const tail = template.slice(at + 1);
  const finishAt = tail.lastIndexOf('"finish_reason":null') + '"finish_reason":'.length;
  return (delta, finishReason = null) => {
    if (finishReason === null) return `${head}${JSON.stringify(delta)}${tail}\n\n`;
    return `${head}${JSON.stringify(delta)}${tail.slice(0, finishAt)}${JSON.stringify(finishReason)}${tail.slice(finishAt + 4)}\n\n`;
  };
}

/** The last chunk of a stream that asked for `stream_options.include_usage`: no choices, the usage. */
export function usageChunkBody(meta: CompletionMeta, usage: Usage): unknown {
  return { ...meta, object: 'chat.completion.chunk', system_fingerprint: null, choices: [], usage };
}

/** An OpenAI error body. */
export function errorBody(status: number, message: string, type?: string, code?: string | null): unknown {
  return { error: { message, type: type ?? errorType(status), param: null, code: code ?? null } };
}

function errorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  return status >= 500 ? 'server_error' : 'invalid_request_error';
}

/** The `GET /v1/models` body listing one model. */
export function modelsBody(model: string, created: number): unknown {
  return { object: 'list', data: [{ id: model, object: 'model', created, owned_by: 'fake-llm' }] };
}

/** A `POST /v1/embeddings` body; each embedding is a number array or its base64 form. */
export function embeddingsBody(model: string, vectors: Array<number[] | string>, promptTokens: number): unknown {
  const data = vectors.map((embedding, index) => ({ object: 'embedding', index, embedding }));
  return { object: 'list', data, model, usage: { prompt_tokens: promptTokens, total_tokens: promptTokens } };
}
