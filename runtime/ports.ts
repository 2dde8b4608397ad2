import type { Usage } from './chat-types.js';

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
  /**
   * A page of a session's records after the record `afterId`: oldest first with greater ids,
   * or with `order: 'desc'` newest first with smaller ids.
   */
  page(sessionId: string, options: { afterId?: number; limit: number; order?: 'asc' | 'desc' }): Promise<ConversationRecord[]>;
  /** How many records a session has. */
  count(sessionId: string): Promise<number>;
  /** The first user message of each of the sessions that has one, by session id (one read for all). */
  firstUserMessages(sessionIds: readonly string[]): Promise<Map<string, string>>;
  /** Deletes every record of a session; returns how many were deleted. */
  deleteSession(sessionId: string): Promise<number>;
}

/**
 * A stored response of the Responses API: a turn of a session as that API shows it. The
 * turn's messages are in the conversation table like every turn; this keeps what the
 * Responses API returns and where in its session the response ends (the session's history
 * hash after it), so that `previous_response_id` can continue or branch from it.
 */
export type ResponseRecord = {
  id: string;
  userId: string;
  sessionId: string;
  previousResponseId: string | null;
  /** The session's history hash right after this response. */
  historyHash: string;
  /** The response object as the API returns it. */
  body: ResponseBody;
  /** The input items of the request, with their ids. */
  input: Array<Record<string, unknown>>;
  createdAt: Date;
};

/** A response object as the API returns it: `status` is one of its fields. */
export type ResponseBody = Record<string, unknown> & { status: string };

/** Where a stored response ended, and where its session is now (`sessionLive` false: its session is deleted or gone). */
export type ResponseEnd = Pick<ResponseRecord, 'id' | 'userId' | 'sessionId' | 'historyHash'> & { status: string; sessionLive: boolean; sessionHistoryHash: string | null };

/**
 * A response object as it is stored: the JSON text the client is sent (a body is serialised
 * once, for the client and for storage), and its status, which the row keeps in a column too.
 */
export type ResponseBodyText = { status: string; json: string };

/** A response before it is stored, its body as its JSON text. */
export type NewResponseRecord = Omit<ResponseRecord, 'createdAt' | 'body'> & { body: ResponseBodyText };

/** Stored responses of the Responses API (stored with their turn's end: see `SessionStore.completeTurn`). */
export interface ResponseStore {
  get(id: string): Promise<ResponseRecord | undefined>;
  /**
   * Where a response ended, without its body: its owner, its session, and whether that
   * session is live and at which history hash now, in one read.
   */
  endOf(id: string): Promise<ResponseEnd | undefined>;
  /** The id of the newest response of a session after which its history hash was `historyHash`, if any. */
  newestEndingAt(sessionId: string, historyHash: string): Promise<string | undefined>;
  /**
   * The chain of responses that ends at `id`, oldest first: it and each previous response
   * (`previousResponseId`), at most `limit` of them, in one read.
   */
  chainTo(id: string, limit: number): Promise<ResponseRecord[]>;
  /** Deletes a response; false when there was none. */
  remove(id: string): Promise<boolean>;
}

/** A streaming event of a background response as it was sent: its number, its type and its JSON. */
export type StoredResponseEvent = { sequence: number; type: string; data: string };

/** How a background response ended: its final body, and where its session then is. */
export type BackgroundResponseEnd = { body: ResponseBodyText; historyHash: string; sessionId: string };

/** A background response's run as its process sees it on renewing. */
export type BackgroundRunState = { id: string; cancelRequested: boolean };

/** A background response's run taken over from a process that stopped, with what continuing it needs. */
export type TakenOverRun = {
  id: string;
  userId: string;
  sessionId: string;
  /** The request that started it, as stored (JSON text). */
  request: string;
  /** The response's body as it stood (JSON text): its id, creation time and parameters. */
  body: string;
  /** The last event stored with the run's last stored step: the events after it are the stopped process's unfinished step. */
  shownThrough: number;
  /** How many times the run was taken over, this time included. */
  attempts: number;
};

/**
 * Background responses (the Responses API's `background: true`) while they run: their runs,
 * which the running process renews, and their streaming events, which any process reads.
 */
export interface BackgroundResponseStore {
  /**
   * Stores a new response (its body as it starts, `queued`), its first events, and its run by
   * `runner`, alive for `leaseMs`, with the `request` (JSON text) another process continues it from.
   */
  start(record: NewResponseRecord, events: StoredResponseEvent[], runner: string, leaseMs: number, request: string): Promise<void>;
  /**
   * Appends events and, when given, sets the response's body as it stands now; with
   * `shownThrough` (a step of the turn is about to be stored), records that the events up to that
   * sequence number are stored.
   */
  record(id: string, events: StoredResponseEvent[], body?: ResponseBodyText, shownThrough?: number): Promise<void>;
  /** Ends a run: the response's final body, history hash and session, and its last events. */
  finish(id: string, end: BackgroundResponseEnd, events: StoredResponseEvent[]): Promise<void>;
  /**
   * Keeps every run of `runner` alive for another `leaseMs`; returns them, each with whether
   * a client asked to cancel it. A run not returned is gone (its response was deleted).
   */
  renew(runner: string, leaseMs: number): Promise<BackgroundRunState[]>;
  /** Asks a response's run to cancel; false when it is not running. */
  requestCancel(id: string): Promise<boolean>;
  /**
   * Marks `failed`, with `message` and a last `response.failed` event, every response whose
   * run was not renewed in time (its process stopped), or every running one with `everyRun`
   * (the embedded database, opened by one process at a time, at start), that cannot be taken
   * over: it was taken over `maxAttempts` times already, or it holds no request; returns their ids.
   */
  failAbandoned(message: string, maxAttempts: number, everyRun?: boolean): Promise<string[]>;
  /**
   * Takes over for `runner`, alive for `leaseMs`, each run that lapsed as `failAbandoned` says
   * and was taken over fewer than `maxAttempts` times; of processes taking over at once, one
   * gets each run.
   */
  takeOver(runner: string, leaseMs: number, maxAttempts: number, everyRun?: boolean): Promise<TakenOverRun[]>;
  /**
   * Deletes a response's events after `through` (an unfinished step's, which its continuation
   * shows again) and returns those kept, in order, with the sequence number the next event
   * takes (after every event ever stored, so a reader that saw the deleted ones reads on).
   */
  rewind(id: string, through: number): Promise<{ events: StoredResponseEvent[]; nextSequence: number }>;
  /** A response's events after `sequence`, in order, at most `limit`. */
  eventsAfter(id: string, sequence: number, limit: number): Promise<StoredResponseEvent[]>;
  /** Deletes the events older than `ageMs` of responses no longer running; returns how many. */
  pruneEvents(ageMs: number): Promise<number>;
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
  /** The metadata a client attached to the session as a conversation; `{}` when none. */
  metadata: SessionMetadata;
  /** The tokens its LLM calls used, by model; `{}` before any. */
  usage: SessionUsage;
};

/** A conversation's metadata, as OpenAI's Conversations API has it: at most 16 string pairs. */
export type SessionMetadata = Record<string, string>;

/** Tokens used by a session's LLM calls, by the model named in each call. */
export type SessionUsage = Record<string, { prompt_tokens: number; completion_tokens: number }>;

/** How a recorded call ended: it returned, it failed (an error, or a tool's error result), or its turn was cancelled. */
export type CallOutcome = 'ok' | 'error' | 'cancelled';

/** What every recorded call has: whose, which turn, in which graph state, when, how long, how it ended. */
type CallBase = {
  sessionId: string;
  userId: string;
  /** The turn the call belongs to (`turn_` and hex), for a timeline per turn. */
  turnId: string;
  /** The request id the service's log lines of the turn's HTTP request carry, to join a call and its log (absent in records stored before). */
  requestId?: string | null;
  /** With tracing on, the trace the call belongs to and its own span (absent when off, unsampled, or stored before). */
  traceId?: string | null;
  spanId?: string | null;
  /** The graph state the call ran in. */
  state: string;
  startedAt: Date;
  durationMs: number;
  outcome: CallOutcome;
  /** The error's text when the call failed. */
  error: string | null;
};

/** An LLM call as it was made: the exact body sent (messages, tools, settings), and what came back. */
export type LlmCallRecord = CallBase & {
  kind: 'llm';
  model: string;
  temperature: number | null;
  maxTokens: number | null;
  /**
   * The JSON body sent to the LLM server, as sent ('' when the call failed before it was sent).
   * Kept as the text the client made anyway: a string costs the garbage collector nothing to
   * trace, where the context's objects, held by the recent calls, would be traced at every
   * collection.
   */
  request: string;
  finishReason: string | null;
  /** The server's token counts, or the service's (`estimated`) when it sent none. */
  usage: Usage | null;
  /** The model's reasoning in the reply (null when it gave none, or the call failed; absent in records stored before). */
  reasoning?: string | null;
  /**
   * What the service mended or made of the call for its server, by name: the history it left
   * out to fit the window (`context_fitted:N`), the tools described in the prompt, the tool
   * calls read from text, the ids and indexes it gave them, the usage it counted… (see
   * docs/llm-servers.md). Empty when the server answered as OpenAI does. Absent in records
   * stored before.
   */
  repairs?: string[];
};

/** A call of one of the service's tools: what the model called, where it ran, with what, and its result. */
export type ToolCallRecord = CallBase & {
  kind: 'tool';
  /** The name the model called. */
  name: string;
  server: string | null;
  tool: string | null;
  arguments: string;
  result: string | null;
  /** The approval request of a call the user approved first. */
  approvalRequestId: string | null;
};

/** A call to record; `CallRecord` once it has its id. */
export type NewCallRecord = LlmCallRecord | ToolCallRecord;

/** A recorded call with its id (increasing in the order calls were recorded). */
export type CallRecord = NewCallRecord & { id: number };

/** Where sessions' calls are stored when `inspect.store_calls` is on. */
export interface CallStore {
  append(records: NewCallRecord[]): Promise<void>;
  /** A page of a session's calls, oldest first, with ids greater than `afterId`. */
  page(sessionId: string, options: { afterId?: number; limit: number }): Promise<CallRecord[]>;
  /** Deletes a session's calls; returns how many were deleted. */
  deleteSession(sessionId: string): Promise<number>;
}

/** A session made whole by the Conversations API: its row, and its first conversation records. */
export type NewSession = {
  sessionId: string;
  userId: string;
  metadata: SessionMetadata;
  /** The hash of the first records' turns, so that the next turn continues after them; null for none. */
  historyHash: string | null;
  /** The session's first records, in order. */
  records: Array<Pick<NewConversationRecord, 'role' | 'message'>>;
};

/**
 * The first write of a session this process named for a turn (an id made here, that nobody
 * else can know yet): its row, the turn's first records and, with `lease`, its lease for
 * `lease.holder` at the first generation, held `lease.ttlMs` (see `SessionStore.start`).
 */
export type SessionStart = { sessionId: string; userId: string; records: NewConversationRecord[]; lease?: { holder: string; ttlMs: number } };

/** The generation of a session's first lease: the one `SessionStore.start` takes. */
export const FIRST_LEASE_GENERATION = 1;

/** A session lease taken by a process; `generation` counts every acquisition of the session. */
export type LeaseGrant = { generation: number };

/** What a renewal found: the sessions still held, and those another process asked for. */
export type LeaseRenewal = { kept: string[]; wanted: string[] };

/**
 * The session leases table: one turn at a time per session across processes. Every
 * method is one statement; none holds a connection beyond it.
 */
export interface SessionLeaseStore {
  /** Takes the session's lease for `holder` for `ttlMs` if it is free, expired or held by `holder`; undefined if another holds it. */
  tryAcquire(sessionId: string, holder: string, ttlMs: number): Promise<LeaseGrant | undefined>;
  /**
   * Asks the process holding the session's lease (another than `asker`) to give it back:
   * marks the lease wanted and notifies the holder at once (see `onHandoverAsked`).
   */
  askHandover(sessionId: string, asker: string): Promise<void>;
  /** Extends `holder`'s leases; returns the sessions it still holds, and which of them another process asked for. */
  renew(holder: string, sessionIds: string[], ttlMs: number): Promise<LeaseRenewal>;
  /** Frees the lease if `holder` still holds it at `generation`. */
  release(sessionId: string, holder: string, generation: number): Promise<void>;
  /**
   * Calls `asked` whenever another process asks `holder` to give a session back; resolves
   * once listening. The returned function stops listening. A lost notification is caught by
   * the next renewal's `wanted`.
   */
  onHandoverAsked(holder: string, asked: (sessionId: string) => void): Promise<() => Promise<void>>;
}

/** One transition of a session's actor between graph states. */
export type TransitionRecord = { at: Date; from: string; to: string; reason: string | null };

/** A stored transition: `id` orders a session's transitions and pages them. */
export type StoredTransition = TransitionRecord & { id: number };

/** What a turn's end writes to the session row. */
export type SessionProgress = {
  snapshot: unknown;
  currentState: string;
  transitions: number;
  historyHash: string | null;
  /** The transitions the turn took, in order, stored with it in the transition log. */
  transitionLog?: TransitionRecord[];
  /** The session's token totals after the turn (absent: unchanged). */
  usage?: SessionUsage;
};

/**
 * The lease a turn ran under. Its end stores the session's snapshot only while no other
 * process has taken the lease since: a process that lost it (a database outage longer than
 * the lease) never overwrites the snapshot of the turns that ran elsewhere meanwhile.
 */
export type LeaseFence = { holder: string; generation: number };

/** Where a page of sessions ended: its last session's last activity (µs since the epoch, as text) and id. */
export type SessionCursor = { lastActiveMicros: string; sessionId: string };

/** Sessions of a list, and where the next page starts (null when this is the last). */
export type SessionPage = { sessions: SessionRecord[]; next: SessionCursor | null };

/** The sessions table. */
export interface SessionStore {
  get(sessionId: string): Promise<SessionRecord | undefined>;
  /**
   * Creates the session for `userId` unless it exists, and returns the stored row
   * (whose `userId` may differ when another user owns it: the caller must check);
   * `created` is true when this call made the row, so nothing of the session is stored yet.
   */
  claim(sessionId: string, userId: string): Promise<SessionRecord & { created: boolean }>;
  /** Creates the session with its metadata and first records, in one transaction; fails if the id is taken. */
  create(session: NewSession): Promise<SessionRecord>;
  /**
   * Starts a session whose id was made for its first turn: creates its row (as `claim` would),
   * stores the turn's first records and, with a lease, takes the session's lease at
   * `FIRST_LEASE_GENERATION`, in one statement, so one transaction: all or nothing, and no
   * read first (nothing of the session can exist). The starts of concurrent turns commit
   * together (group commit). Fails (a unique violation) if the id is taken.
   */
  start(start: SessionStart): Promise<void>;
  /** Replaces the metadata of the live session of `userId`; undefined when it has none of that id. */
  updateMetadata(sessionId: string, userId: string, metadata: SessionMetadata): Promise<SessionRecord | undefined>;
  /** The live session of `userId` whose history hash is `historyHash`, if any. */
  findByHistoryHash(userId: string, historyHash: string): Promise<SessionRecord | undefined>;
  /**
   * The live sessions of `userId` active in the last `withinMs` whose history hash is none
   * (no turn ended yet) or `emptyHash` (none answered), newest first, at most `limit`.
   */
  unansweredFirstTurns(userId: string, emptyHash: string, withinMs: number, limit: number): Promise<string[]>;
  /** Records the snapshot at rest and sets `lastActive` to now, with the progress's transition log. */
  saveProgress(sessionId: string, progress: SessionProgress): Promise<void>;
  /**
   * Ends a turn in one round trip and one transaction: stores `records` (in order) and
   * records the snapshot at rest, as `append` and `saveProgress` would. The transition log
   * is stored only while the session is live and its stored transition count is below the
   * progress's, so a retry of a turn that did commit does not log its transitions twice.
   * With a `fence`, the snapshot is stored only while the lease is still the one the turn
   * ran under (the records are stored either way: they were acknowledged). `response`, the
   * Responses API's record of the turn, is stored in the same statement, as the records are
   * (a retry that finds it stored leaves it). Returns whether the snapshot was stored (false:
   * the session is deleted or the lease moved on).
   */
  completeTurn(sessionId: string, records: NewConversationRecord[], progress: SessionProgress, fence?: LeaseFence, response?: NewResponseRecord): Promise<boolean>;
  /**
   * A page of sessions, most recently active first, optionally of one user. `after` is the
   * previous page's `next`: the exact last activity and id of its last session, so sessions
   * active in the same millisecond are neither skipped nor listed twice.
   */
  list(options: { userId?: string; limit: number; after?: SessionCursor }): Promise<SessionPage>;
  /** The tokens a user's sessions used, by model, deleted sessions included, and how many sessions the user has. */
  usageOf(userId: string): Promise<{ sessions: number; usage: SessionUsage }>;
  /** Marks the session deleted (it can no longer be continued); clears the snapshot. */
  markDeleted(sessionId: string): Promise<void>;
  /** A page of a session's transition log, oldest first, with ids greater than `afterId`. */
  listTransitions(sessionId: string, options: { afterId?: number; limit: number }): Promise<StoredTransition[]>;
  /** Deletes a session's transition log; returns how many transitions were deleted. */
  deleteTransitions(sessionId: string): Promise<number>;
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

/** The embedder whose vectors fill the long-term memories: `model` for the LLM server's, null for the local one. */
export type EmbedderRecord = { source: 'llm' | 'local'; model: string | null };

/** Which embedder the stored memories were made with: vectors of two embedders are not comparable. */
export interface EmbedderRecordStore {
  get(): Promise<EmbedderRecord | undefined>;
  /**
   * Records `embedder` unless another one is recorded while memories exist; returns the
   * record in force afterwards (the other one, when it stood).
   */
  record(embedder: EmbedderRecord): Promise<EmbedderRecord>;
  /**
   * Records `embedder` unless an embedder is recorded already (one statement: of processes
   * recording together, the first one's stands); returns the record in force afterwards.
   */
  recordFirst(embedder: EmbedderRecord): Promise<EmbedderRecord>;
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

/** One user's stored tokens for one identity provider; the token set itself stays encrypted. */
export type StoredToken = {
  userId: string;
  provider: string;
  /** The token set as the token cipher wrote it (bound to userId and provider). */
  ciphertext: string;
  expiresAt: Date | null;
  scope: string | null;
  /** When the user (re)connected the account. */
  createdAt: Date;
  /** When the row last changed (a refresh). */
  updatedAt: Date;
};

/** A token row before it is stored. */
export type NewStoredToken = Pick<StoredToken, 'userId' | 'provider' | 'ciphertext' | 'expiresAt' | 'scope'>;

/** The OAuth token table: at most one row per user and provider. */
export interface TokenStore {
  get(userId: string, provider: string): Promise<StoredToken | undefined>;
  /** Every provider row of a user, by provider. */
  listByUser(userId: string): Promise<StoredToken[]>;
  /** Stores a new connection, replacing any earlier one of the same user and provider (createdAt restarts). */
  put(token: NewStoredToken): Promise<StoredToken>;
  /**
   * Replaces the row's token set only while it still holds `expectedCiphertext` (compare and
   * swap: a refresh never overwrites a reconnection or resurrects a disconnection). True when replaced.
   */
  replace(expectedCiphertext: string, token: NewStoredToken): Promise<boolean>;
  /** Deletes the row; with `expectedCiphertext`, only while it still holds it. True when a row was deleted. */
  remove(userId: string, provider: string, expectedCiphertext?: string): Promise<boolean>;
}

/** A login started at the identity provider and not finished yet. */
export type OAuthStateRecord = {
  state: string;
  /** The user the login was started for: the tokens are stored for this user. */
  userId: string;
  provider: string;
  codeVerifier: string;
  /** Null when the scopes do not include `openid` (no ID token to check it against). */
  nonce: string | null;
  /** Hash of the login cookie of the browser that started the login. */
  browserBinding: string;
  expiresAt: Date;
  createdAt: Date;
};

/** Pending OAuth logins, each usable once. */
export interface OAuthStateStore {
  create(record: Omit<OAuthStateRecord, 'createdAt'>): Promise<void>;
  /**
   * Deletes the state and returns it, atomically: of two concurrent calls only one gets it.
   * Undefined when unknown, already used, or expired at `now` (an expired row is deleted too).
   */
  consume(state: string, now?: Date): Promise<OAuthStateRecord | undefined>;
  /** Deletes the states expired at `now`; returns how many. */
  purgeExpired(now?: Date): Promise<number>;
}

/** A webhook subscription as stored (the secret included: the HMAC needs it). */
export type WebhookSubscription = {
  id: string;
  url: string;
  events: string[];
  secret: string;
  active: boolean;
  /** The user whose events it receives; null: every user's (an admin subscription). */
  ownerUserId: string | null;
  createdAt: Date;
  updatedAt: Date;
};

/** Where a delivery stands: waiting for its (next) attempt, acknowledged with a 2xx, or given up. */
export type WebhookDeliveryStatus = 'pending' | 'delivered' | 'failed';

/** One row of the outbox. */
export type WebhookDelivery = {
  /** Outbox order (identity). */
  seq: number;
  deliveryId: string;
  subscriptionId: string;
  agentId: string | null;
  event: string;
  /** The exact request body sent, signature included. */
  payload: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  nextAttemptAt: Date;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: Date;
  deliveredAt: Date | null;
};

/** A delivery to add to the outbox. */
export type NewWebhookDelivery = Pick<WebhookDelivery, 'deliveryId' | 'subscriptionId' | 'agentId' | 'event' | 'payload'>;

/** The outcome of one failed attempt: the next one is due `retryAfterMs` from now (the database's clock). */
export type WebhookAttemptFailure = { attempts: number; failed: boolean; retryAfterMs: number; lastStatus: number | null; lastError: string };

/**
 * Subscriptions and the delivery outbox. Several processes may share it: a delivery is
 * attempted only by the process that claimed it (`holder`), and an attempt's outcome is
 * written only while that process still holds the claim.
 */
export type WebhookStore = {
  /** `ownerUserId` absent or null: an admin subscription, which receives every user's events. */
  createSubscription(input: { id: string; url: string; events: string[]; secret: string; active: boolean; ownerUserId?: string | null }): Promise<WebhookSubscription>;
  /** Every subscription, or (with `ownerUserId`) that user's only. */
  listSubscriptions(options?: { ownerUserId?: string }): Promise<WebhookSubscription[]>;
  getSubscription(id: string): Promise<WebhookSubscription | undefined>;
  setActive(id: string, active: boolean): Promise<WebhookSubscription | undefined>;
  deleteSubscription(id: string): Promise<boolean>;
  activeSubscriptions(): Promise<WebhookSubscription[]>;
  /** Adds the deliveries whose subscription still exists and is active (another process may have changed it). */
  enqueue(deliveries: NewWebhookDelivery[]): Promise<void>;
  /** One subscription's deliveries, newest first, older than the cursor `after` (a delivery id). */
  listDeliveries(subscriptionId: string, options: { limit: number; after?: string }): Promise<WebhookDelivery[]>;
  getDelivery(subscriptionId: string, deliveryId: string): Promise<WebhookDelivery | undefined>;
  /** Puts a delivery back to pending with fresh attempts. */
  requeue(subscriptionId: string, deliveryId: string): Promise<WebhookDelivery | undefined>;
  /**
   * Claims for `holder`, for `leaseMs`, in one statement, the oldest pending delivery of every
   * (subscription, agent) whose attempt is due and which nobody holds (or whose claim lapsed).
   * A later delivery of the same agent is never returned while an earlier one is pending, so
   * across all processes at most one delivery per (subscription, agent) is in flight.
   */
  claimDueHeads(holder: string, leaseMs: number, limit: number): Promise<WebhookDelivery[]>;
  /** Records a 2xx and clears the claim; false (nothing written) when `holder` no longer holds it. */
  markDelivered(seq: number, holder: string, status: number): Promise<boolean>;
  /** Records a failed attempt and clears the claim; false (nothing written) when `holder` no longer holds it. */
  markFailedAttempt(seq: number, holder: string, failure: WebhookAttemptFailure): Promise<boolean>;
  /** Gives back claims of `holder` without an attempt: the deliveries stay pending as they were. */
  releaseClaims(seqs: number[], holder: string): Promise<void>;
  /** How many deliveries are pending (the backlog, for /metrics); read from the status index. */
  countPending(): Promise<number>;
};

/** An answer recorded under an idempotency key: its HTTP status, the headers a repeat gets, and its body (a stream's whole text). */
export type RecordedAnswer = { status: number; headers: Record<string, string>; body: string };

/** A request's idempotency key as stored: `running` while its first request runs (held by `holder`), then `done` with its answer. */
export type IdempotencyKeyRecord = {
  requestHash: string;
  state: 'running' | 'done';
  holder: string;
  answer: RecordedAnswer | null;
  /** From `claim`: the key was there before (its holder stopped renewing it, or it expired) and is now this one's. */
  takenOver?: boolean;
};

/** Which key of which user, and the hash of the request (endpoint and body) it was first used with. */
export type IdempotencyKeyClaim = { userId: string; key: string; requestHash: string };

/**
 * Idempotency keys (`Idempotency-Key`), shared by every process: a key is held by the process
 * running its first request, under a lease it renews, and keeps that request's answer until
 * it expires.
 */
/** Tokens a user's LLM calls used on one day (UTC, `YYYY-MM-DD`). */
export type DailyTokens = { userId: string; day: string; promptTokens: number; completionTokens: number };

/** What a user's calls used: on one day, and from a day on (a month so far). */
export type TokensUsed = { day: number; since: number };

/**
 * The token budgets' counter: each user's tokens by day, one counter for every process on the
 * database.
 */
export interface TokenUsageStore {
  /** Adds each entry's tokens to its user's day; the adds of concurrent calls commit together. */
  add(entries: DailyTokens[]): Promise<void>;
  /** The tokens (input and output) `userId` used on `day`, and on every day from `since` on. */
  used(userId: string, day: string, since: string): Promise<TokensUsed>;
}

export interface IdempotencyKeyStore {
  /**
   * Takes the key for `holder` when it is new, expired, or running with the same request whose
   * holder's lease lapsed; undefined when it was not taken (read it with `get`).
   */
  claim(claim: IdempotencyKeyClaim, holder: string, leaseMs: number, ttlMs: number): Promise<IdempotencyKeyRecord | undefined>;
  get(userId: string, key: string): Promise<IdempotencyKeyRecord | undefined>;
  /** Extends `holder`'s lease of a running key; false when it no longer holds it. */
  renew(userId: string, key: string, holder: string, leaseMs: number): Promise<boolean>;
  /** Records the answer of the key `holder` runs. */
  finish(userId: string, key: string, holder: string, answer: RecordedAnswer): Promise<void>;
  /** Forgets the key `holder` runs, so that the next request with it runs afresh. */
  release(userId: string, key: string, holder: string): Promise<void>;
  /** Deletes the expired keys; how many. */
  deleteExpired(): Promise<number>;
}

/** The step that holds what a turn needs to be finished by a process that finds it abandoned (see `TurnJournal`). */
export const TURN_SETTINGS_STEP = 'settings';

/**
 * The steps of sessions' running turns as each completes (an LLM round's reply with the tool
 * calls it makes, before they run; a tool call's result), so that a turn whose process died is
 * continued from its last stored step. A session keeps the steps of one turn, named by its
 * `anchor`: storing a step of another turn drops the earlier turn's.
 */
export interface TurnStepStore {
  /** Stores a step of the session's turn `anchor` (a step stored again is left as it is). */
  record(sessionId: string, anchor: string, step: string, body: string): Promise<void>;
  /** The stored steps of the session's turn `anchor`, by step. */
  load(sessionId: string, anchor: string): Promise<Map<string, string>>;
  /** Drops the session's stored steps. */
  clear(sessionId: string): Promise<void>;
  /**
   * Sessions of live users with a turn that stored its settings (see `TurnJournal`) and whose
   * last turn did not end unanswered in a live process, quiet for `quietMs`: with `leases`,
   * their lease lapsed at least that long ago (or was never taken); without (a process alone
   * on its database), their newest step is that old. At most `limit`, the oldest turns first.
   */
  abandoned(quietMs: number, leases: boolean, limit: number): Promise<Array<{ sessionId: string; userId: string }>>;
}

/**
 * True for an error the database raised for the data or the statement, not the connection
 * (SQLSTATE classes 22, 23, 42): the same write would fail again, so it is not retried.
 */
export function isDataError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^(22|23|42)/.test(code);
}

/** A channel of short messages between the service's processes (PostgreSQL's NOTIFY / LISTEN). */
export type NotificationChannel = {
  /** Sends `payload` (at most 8000 bytes, PostgreSQL's limit) to every process listening, this one included. */
  publish(payload: string): Promise<void>;
  /** Calls `onPayload` with each payload sent; resolves once listening, with the way to stop. */
  subscribe(onPayload: (payload: string) => void): Promise<() => Promise<void>>;
};
