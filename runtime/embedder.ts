import OpenAI from 'openai';
import { hashedEmbedding } from './hashed-embedding.js';

/** Turns texts into vectors of a fixed dimension. */
export type Embedder = {
  /** `llm` (the LLM server's /v1/embeddings) or `local` (hashed words). */
  readonly source: 'llm' | 'local';
  embed(texts: string[]): Promise<number[][]>;
};

/** Settings of the embeddings link. */
export type EmbedderOptions = {
  mode: 'auto' | 'llm' | 'local';
  baseUrl: string;
  apiKey: string;
  model: string;
  dimensions: number;
  timeoutMs: number;
};

/** The offline embedder: the hashed bag of words of each text. */
export function createLocalEmbedder(dimensions: number): Embedder {
  return { source: 'local', embed: async (texts) => texts.map((text) => hashedEmbedding(text, dimensions)) };
}

/** The LLM server's /v1/embeddings; a vector of another size than configured is an error. */
export function createLlmEmbedder(options: Omit<EmbedderOptions, 'mode'>): Embedder {
  const sdk = new OpenAI({ baseURL: options.baseUrl, apiKey: options.apiKey, maxRetries: 0, timeout: options.timeoutMs });
  return {
    source: 'llm',
    async embed(texts) {
      const response = await sdk.embeddings.create({ model: options.model, input: texts, encoding_format: 'float' });
      const vectors = [...response.data].sort((a, b) => a.index - b.index).map((item) => item.embedding);
      const wrong = vectors.find((vector) => vector.length !== options.dimensions);
      if (wrong) {
        throw new Error(`the embedding model returns ${wrong.length} dimensions; memory.embedding_dimensions is ${options.dimensions}`);
      }
      return vectors;
    },
  };
}

/**
 * Chooses the embedder. `auto` asks the LLM server once, at start-up: if it embeds a probe
 * text with the configured dimensions, memories use it; otherwise the local embedder.
 */
export async function chooseEmbedder(options: EmbedderOptions): Promise<{ embedder: Embedder; reason: string }> {
  if (options.mode === 'local') return { embedder: createLocalEmbedder(options.dimensions), reason: 'configured' };
  const remote = createLlmEmbedder(options);
  if (options.mode === 'llm') return { embedder: remote, reason: 'configured' };
  try {
    await remote.embed(['probe']);
    return { embedder: remote, reason: 'the LLM server offers embeddings' };
  } catch (error) {
    return { embedder: createLocalEmbedder(options.dimensions), reason: `the LLM server offers no usable embeddings (${(error as Error).message})` };
  }
}
