/** One finished exchange, the unit consolidated into long-term memory. */
export type Exchange = { userId: string; sessionId: string; user: string; assistant: string };

/** Long-term memory as the supervisor uses it. */
export interface LongTermMemory {
  /** The memories of `userId` most relevant to `text`, most relevant first. */
  recall(userId: string, text: string): Promise<string[]>;
  /** Stores a finished exchange; never throws (failures are reported on the event bus). */
  consolidate(exchange: Exchange): Promise<void>;
}
