import type { Embedder } from '../llm/embedder.js';
import type { EventBus } from '../observability/event-bus.js';
import type { Exchange, LongTermMemory } from './long-term-memory.js';
import type { VectorMemoryStore } from '../ports.js';

/** What long-term memory is built from. */
export type VectorMemoryDeps = {
  store: VectorMemoryStore;
  embedder: Embedder;
  events: EventBus;
  /** Memories recalled into a context. */
  results: number;
};

/**
 * Long-term memory over pgvector. Each finished exchange (the user's message and the
 * agent's reply) is consolidated into one memory of the user; a new message recalls the
 * user's memories nearest to it (cosine), from any of their sessions.
 */
export function createVectorMemory(deps: VectorMemoryDeps): LongTermMemory {
  return {
    ready: async () => {},
    async recall(userId, text) {
      if (!text.trim()) return [];
      try {
        const [embedding] = await deps.embedder.embed([text]);
        const found = await deps.store.search(userId, embedding!, deps.results);
        return found.map((entry) => entry.content);
      } catch (error) {
        deps.events.emit('storage:error', { operation: 'recall long-term memory', error: error as Error, attempt: 1, willRetry: false });
        return [];
      }
    },
    async consolidate(exchange: Exchange) {
      const content = `User: ${exchange.user}\nAssistant: ${exchange.assistant}`;
      const [embedding] = await deps.embedder.embed([content]);
      await deps.store.add([{ userId: exchange.userId, sessionId: exchange.sessionId, content, embedding: embedding! }]);
      deps.events.emit('memory:written', { sessionId: exchange.sessionId, userId: exchange.userId, entries: 1, kind: 'long_term' });
    },
  };
}
