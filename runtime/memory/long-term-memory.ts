/** One finished exchange, the unit consolidated into long-term memory. */
export type Exchange = { userId: string; sessionId: string; user: string; assistant: string };

/** Long-term memory as the supervisor uses it. */
export interface LongTermMemory {
  /**
   * Resolves once recall and consolidation can run (at once, unless the embedder is still
   * being chosen); rejects with a `MEMORY_UNAVAILABLE` ServiceError when they cannot.
   */
  ready(): Promise<void>;
  /** The memories of `userId` most relevant to `text`, most relevant first; empty when recall fails. */
  recall(userId: string, text: string): Promise<string[]>;
  /** Stores a finished exchange; rejects when it could not (the caller retries). */
  consolidate(exchange: Exchange): Promise<void>;
}
