import type { ServerResponse } from 'node:http';
import { embedText, toBase64 } from './embeddings.js';
import { FakeLlmHttpError, sendJson } from './http-io.js';
import { countWords } from './messages.js';
import { embeddingsBody } from './openai-shapes.js';

const MAX_DIMENSIONS = 16_384;

/** A `POST /v1/embeddings` body as the fake LLM reads it. */
export type EmbeddingsRequestBody = {
  input?: unknown;
  model?: string;
  dimensions?: number;
  encoding_format?: 'float' | 'base64';
  [key: string]: unknown;
};

/** Answers an embeddings request with one deterministic vector per input, as floats or base64. */
export function answerEmbeddings(
  res: ServerResponse,
  body: EmbeddingsRequestBody,
  defaults: { model: string; dimensions: number },
): void {
  const texts = embeddingInputs(body.input);
  const dimensions = embeddingSize(body.dimensions, defaults.dimensions);
  const vectors = texts.map((text) => embedText(text, dimensions));
  const encoded = body.encoding_format === 'base64' ? vectors.map(toBase64) : vectors;
  const tokens = texts.reduce((sum, text) => sum + countWords(text), 0);
  sendJson(res, 200, embeddingsBody(body.model ?? defaults.model, encoded, tokens));
}

/** The texts to embed: a string, strings, or token arrays (embedded as their numbers' text). */
function embeddingInputs(input: unknown): string[] {
  if (typeof input === 'string') return [input];
  if (Array.isArray(input) && input.length > 0) {
    if (input.every((item) => typeof item === 'number')) return [input.join(' ')];
    if (input.every(isTextOrTokens)) return input.map((item) => (typeof item === 'string' ? item : item.join(' ')));
  }
  throw new FakeLlmHttpError(400, "'input' must be a non-empty string, array of strings or array of token arrays");
}

function isTextOrTokens(item: unknown): item is string | number[] {
  return typeof item === 'string' || (Array.isArray(item) && item.every((token) => typeof token === 'number'));
}

function embeddingSize(requested: unknown, fallback: number): number {
  if (requested === undefined || requested === null) return fallback;
  if (typeof requested === 'number' && Number.isInteger(requested) && requested > 0 && requested <= MAX_DIMENSIONS) {
    return requested;
  }
  throw new FakeLlmHttpError(400, `'dimensions' must be an integer from 1 to ${MAX_DIMENSIONS}`);
}
