import type OpenAI from 'openai';
import { ConfigError } from '../../config/load-config.js';
import { hashedEmbedding } from './hashed-embedding.js';
import type { EmbedderRecord, EmbedderRecordStore } from '../ports.js';
import { lazyModule } from '../lazy-module.js';

/** Turns texts into vectors of a fixed dimension. */
export type Embedder = {
  /** `llm` (the LLM server's /v1/embeddings) or `local` (hashed words). */
  readonly source: 'llm' | 'local';
  /** One vector per text, in order; `signal` cancels a request in flight. */
  embed(texts: string[], signal?: AbortSignal): Promise<number[][]>;
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

/** The `openai` SDK, loaded by the first embedding asked of the LLM server (turns call the LLM server without it). */
const openaiSdk = lazyModule(() => import('openai'));

/** The LLM server's /v1/embeddings; a vector of another size than configured is an error. */
export function createLlmEmbedder(options: Omit<EmbedderOptions, 'mode'>): Embedder {
  let client: OpenAI | undefined;
  return {
    source: 'llm',
    async embed(texts, signal) {
      if (!client) {
        const { default: OpenAIClient } = await openaiSdk.load();
        client ??= new OpenAIClient({ baseURL: options.baseUrl, apiKey: options.apiKey, maxRetries: 0, timeout: options.timeoutMs });
      }
      const response = await client.embeddings.create({ model: options.model, input: texts, encoding_format: 'float' }, { signal });
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
 * Chooses the embedder and records it beside the memories, so that their vectors all come
 * from one embedder. `auto` keeps the recorded one; with none recorded it asks the LLM
 * server once: if it embeds a probe text with the configured dimensions, memories use it,
 * otherwise the local embedder; of processes choosing at once, the first to record its choice
 * has it used by all. A configured embedder other than the one the stored
 * memories were made with is a ConfigError: their vectors would not be comparable. `signal`
 * cancels asking the LLM server; then nothing is recorded.
 */
export async function chooseEmbedder(options: EmbedderOptions, records: EmbedderRecordStore, signal?: AbortSignal): Promise<{ embedder: Embedder; reason: string }> {
  const recorded = await records.get();
  if (options.mode === 'auto' && !recorded) return firstChoice(options, records, signal);
  const chosen = options.mode === 'auto' && recorded ? { embedder: embedderOf(recorded, options), reason: 'the stored memories were made with it' } : await configuredEmbedder(options, signal);
  signal?.throwIfAborted();
  return checked(chosen, await records.record(recordOf(chosen.embedder, options)), options);
}

/**
 * `auto`'s choice on a database with no embedder recorded: the probe's, recorded unless another
 * process recorded its choice meanwhile (two first starts, two workers or instances, racing on
 * a new database), in which case that one is used: every process embeds with the one recorded.
 */
async function firstChoice(options: EmbedderOptions, records: EmbedderRecordStore, signal?: AbortSignal): Promise<{ embedder: Embedder; reason: string }> {
  const probed = await configuredEmbedder(options, signal);
  signal?.throwIfAborted();
  const wanted = recordOf(probed.embedder, options);
  const inForce = await records.recordFirst(wanted);
  if (inForce.source === wanted.source && inForce.model === wanted.model) return probed;
  return checked({ embedder: embedderOf(inForce, options), reason: 'another process starting at the same time chose it first' }, inForce, options);
}

/** `chosen`, if the record in force names it; otherwise the ConfigError that says how to go on. */
function checked(chosen: { embedder: Embedder; reason: string }, inForce: EmbedderRecord, options: EmbedderOptions): { embedder: Embedder; reason: string } {
  const wanted = recordOf(chosen.embedder, options);
  if (inForce.source !== wanted.source || inForce.model !== wanted.model) {
    throw new ConfigError(
      `the long-term memories were embedded by ${describe(inForce)}, and this configuration embeds with ${describe(wanted)}: their vectors cannot be compared. ` +
        `Set ${settingsFor(inForce)}, or re-embed the stored memories first (svc-agent memory reembed; in a checkout, npm run memory:reembed).`,
    );
  }
  return chosen;
}

/** Whether choosing the embedder asks the LLM server (`auto` with none recorded yet), which may take up to `timeoutMs`; otherwise it reads and writes the record only. */
export function asksLlmServer(options: EmbedderOptions, recorded: EmbedderRecord | undefined): boolean {
  return options.mode === 'auto' && recorded === undefined;
}

/** What a record says of `embedder`. */
export function recordOf(embedder: Embedder, options: EmbedderOptions): EmbedderRecord {
  return { source: embedder.source, model: embedder.source === 'llm' ? options.model : null };
}

/** The embedder the configuration asks for, whatever is recorded (`auto` probes the LLM server; `signal` cancels the probe, which then rejects). */
export async function configuredEmbedder(options: EmbedderOptions, signal?: AbortSignal): Promise<{ embedder: Embedder; reason: string }> {
  if (options.mode === 'local') return { embedder: createLocalEmbedder(options.dimensions), reason: 'configured' };
  const remote = createLlmEmbedder(options);
  if (options.mode === 'llm') return { embedder: remote, reason: 'configured' };
  try {
    await remote.embed(['probe'], signal);
    return { embedder: remote, reason: 'the LLM server offers embeddings' };
  } catch (error) {
    // Cancelled, the probe says nothing of the LLM server: the local embedder is not chosen for it.
    if (signal?.aborted) throw signal.reason;
    return { embedder: createLocalEmbedder(options.dimensions), reason: `the LLM server offers no usable embeddings (${(error as Error).message})` };
  }
}

/** The embedder of a record's source, as configured (a model other than the recorded one is caught by the record). */
function embedderOf(recorded: EmbedderRecord, options: EmbedderOptions): Embedder {
  return recorded.source === 'local' ? createLocalEmbedder(options.dimensions) : createLlmEmbedder(options);
}

function describe(record: EmbedderRecord): string {
  return record.source === 'local' ? 'the local embedder' : `the LLM server's model '${record.model}'`;
}

function settingsFor(record: EmbedderRecord): string {
  return record.source === 'local' ? 'memory.embeddings to local (MEMORY_EMBEDDINGS=local)' : `memory.embeddings to llm or auto and llm.embedding_model to '${record.model}' (LLM_EMBEDDING_MODEL)`;
}
