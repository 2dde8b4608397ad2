/**
 * The ports the runtime needs from storage. `storage/` implements them; tests may pass
 * in-memory versions built on the same contracts.
 */

/** One stored message: the specification's conversation record. */
export type ConversationRecord = {
  id: number;
  userId: string;
  sessionId: string;
  role: string;
  message: string;
  createdAt: Date;
};

/** A conversation record before it is stored. */
export type NewConversationRecord = Pick<ConversationRecord, 'userId' | 'sessionId' | 'role' | 'message'>;

/** The conversation table. */
export interface ConversationStore {
  /** Stores the records in the given order in one transaction and returns them with ids. */
  append(records: NewConversationRecord[]): Promise<ConversationRecord[]>;
  /** The last `limit` records of a session, oldest first. */
  recent(sessionId: string, limit: number): Promise<ConversationRecord[]>;
  /** A page of a session's records, oldest first, with ids greater than `afterId`. */
  page(sessionId: string, options: { afterId?: number; limit: number }): Promise<ConversationRecord[]>;
  /** How many records a session has. */
  count(sessionId: string): Promise<number>;
  /** Deletes every record of a session; returns how many were deleted. */
  deleteSession(sessionId: string): Promise<number>;
}

/** A session (an agent): its owner, its actor snapshot at rest and its bookkeeping. */
export type SessionRecord = {
  sessionId: string;
  userId: string;
  createdAt: Date;
  lastActive: Date;
  /** Hash of the conversation as the client last saw it, to recognise resent histories. */
  historyHash: string | null;
  /** The XState persisted snapshot at rest, or null before the first turn ended. */
  snapshot: unknown;
  /** The graph state the snapshot is in. */
  currentState: string | null;
  /** How many transitions the session's actor has taken. */
  transitions: number;
  deletedAt: Date | null;
};

/** What a turn's end writes to the session row. */
export type SessionProgress = {
  snapshot: unknown;
  currentState: string;
  transitions: number;
  historyHash: string | null;
};

/** The sessions table. */
export interface SessionStore {
  get(sessionId: string): Promise<SessionRecord | undefined>;
  /**
   * Creates the session for `userId` unless it exists, and returns the stored row
   * (whose `userId` may differ when another user owns it: the caller must check).
   */
  claim(sessionId: string, userId: string): Promise<SessionRecord>;
  /** The live session of `userId` whose history hash is `historyHash`, if any. */
  findByHistoryHash(userId: string, historyHash: string): Promise<SessionRecord | undefined>;
  /** Records the snapshot at rest and sets `lastActive` to now. */
  saveProgress(sessionId: string, progress: SessionProgress): Promise<void>;
  /** Sessions, most recently active first, optionally of one user; `before` pages by lastActive. */
  list(options: { userId?: string; limit: number; before?: Date }): Promise<SessionRecord[]>;
  /** Marks the session deleted (it can no longer be continued); clears the snapshot. */
  markDeleted(sessionId: string): Promise<void>;
}

/** A long-term memory of a user. */
export type MemoryEntry = {
  id: number;
  userId: string;
  sessionId: string;
  content: string;
  createdAt: Date;
};

/** Long-term vector memory, scoped to the user. */
export interface VectorMemoryStore {
  add(entries: Array<Omit<MemoryEntry, 'id' | 'createdAt'> & { embedding: number[] }>): Promise<MemoryEntry[]>;
  /** The `limit` entries of `userId` nearest to `embedding` (cosine distance), nearest first. */
  search(userId: string, embedding: number[], limit: number): Promise<Array<MemoryEntry & { distance: number }>>;
  countBySession(sessionId: string): Promise<number>;
  listBySession(sessionId: string): Promise<MemoryEntry[]>;
  deleteBySession(sessionId: string): Promise<number>;
}

/** Where per-user tool servers get the user's access token for the identity provider. */
export interface AccessTokenSource {
  /**
   * A valid access token of `userId`, refreshed first when it is about to expire; null when
   * the user has not connected an account (or it can no longer be refreshed).
   */
  getAccessToken(userId: string, signal?: AbortSignal): Promise<string | null>;
  /** The URL a user opens to connect their account: `<public_url>/auth/idp/login?user_id=…`. */
  loginUrl(userId: string): string;
}
