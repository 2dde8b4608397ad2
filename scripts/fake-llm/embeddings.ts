import { hashedEmbedding } from '../../runtime/llm/hashed-embedding.js';

/** The scripted server's embedding of a text: the service's local hashed embedding. */
export const embedText = hashedEmbedding;

/** The OpenAI `encoding_format: 'base64'` form of a vector: little-endian float32 bytes. */
export function toBase64(vector: number[]): string {
  const floats = Float32Array.from(vector);
  return Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength).toString('base64');
}
