const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/**
 * The local embedding: a deterministic unit vector for a text, a signed, hashed bag of its
 * lower-cased words (feature hashing), so texts that share words are closer (cosine) than
 * texts that do not. Long-term memory uses it when the LLM server offers no embeddings; the
 * scripted LLM server answers /v1/embeddings with it.
 */
export function hashedEmbedding(text: string, dimensions: number): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  const words = text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [''];
  for (const word of words) {
    const hash = fnv1a(word);
    const index = hash % dimensions;
    vector[index] = (vector[index] ?? 0) + ((hash & 0x80000000) === 0 ? 1 : -1);
  }
  return normalise(vector);
}

function fnv1a(text: string): number {
  let hash = FNV_OFFSET;
  for (let i = 0; i < text.length; i += 1) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, FNV_PRIME);
  }
  return hash >>> 0;
}

function normalise(vector: number[]): number[] {
  const norm = Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0));
  // Words whose signs cancel out leave a zero vector, which has no direction: fall back to a fixed one.
  if (norm === 0) return vector.map((_, index) => (index === 0 ? 1 : 0));
  return vector.map((value) => value / norm);
}
