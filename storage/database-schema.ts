import type { ColumnType, Generated } from 'kysely';

/** A `timestamptz` column the database fills in (drivers return a Date). */
type CreatedTimestamp = ColumnType<Date, Date | undefined, Date>;

/** The `conversations` table: the specification's conversation record, one row per message. */
export type ConversationsTable = {
  id: Generated<number>;
  user_id: string;
  session_id: string;
  role: string;
  message: string;
  created_at: CreatedTimestamp;
};

/** The `sessions` table: one row per session (agent) with its snapshot at rest. */
export type SessionsTable = {
  session_id: string;
  user_id: string;
  created_at: CreatedTimestamp;
  last_active: CreatedTimestamp;
  history_hash: string | null;
  /** jsonb: written as JSON text, read back parsed. */
  snapshot: ColumnType<unknown, string | null | undefined, string | null>;
  current_state: string | null;
  transitions: ColumnType<number, number | undefined, number>;
  deleted_at: Date | null;
  /** jsonb: the conversation metadata, written as JSON text, read back parsed; null reads as none. */
  metadata: ColumnType<Record<string, string> | null, string | null | undefined, string | null>;
  /** jsonb: the tokens used, by model (see `SessionUsage`), written as JSON text, read back parsed. */
  usage: ColumnType<Record<string, { prompt_tokens: number; completion_tokens: number }>, string | undefined, string>;
};

/** The `responses` table: the Responses API's responses, each a turn of a session. */
export type ResponsesTable = {
  id: string;
  user_id: string;
  session_id: string;
  previous_response_id: string | null;
  history_hash: string;
  /** The response's status (`queued`, `in_progress`, `completed`, `failed`, `cancelled`). */
  status: string;
  /** The response object as the JSON text the client was sent (see stored-response-body.ts for older rows). */
  body: string;
  /** The input items as JSON text. */
  input: string;
  created_at: CreatedTimestamp;
};

/** The `background_runs` table: the background responses running now, and who runs them. */
export type BackgroundRunsTable = {
  response_id: string;
  runner: string;
  expires_at: Date;
  cancel_requested: Generated<boolean>;
  /** The request that started the response (its JSON text), for a process that takes the run over. */
  request: string | null;
  /** How many times another process (or this one after a restart) took the run over. */
  attempts: Generated<number>;
  /** The sequence number of the last event stored with the run's last stored step. */
  shown_through: Generated<number>;
};

/** The `response_events` table: a background response's streaming events, by sequence number. */
export type ResponseEventsTable = {
  response_id: string;
  sequence: number;
  type: string;
  /** The event's JSON, as it was sent. */
  data: string;
  created_at: CreatedTimestamp;
};

/** The `session_leases` table: which process runs a session's turns, until when. */
export type SessionLeasesTable = {
  session_id: string;
  holder: string;
  /** bigint: read back as a string by `pg`. */
  generation: ColumnType<string | number, number | undefined, number>;
  expires_at: Date;
  /** Another process asked for the session: the holder gives the lease back once its turn ends. */
  wanted: ColumnType<boolean, boolean | undefined, boolean>;
};

/** The `session_transitions` table: each transition a session's actor took, in order. */
export type SessionTransitionsTable = {
  /** bigint identity: drivers may return it as a string. */
  id: ColumnType<string | number, never, never>;
  session_id: string;
  at: Date;
  from_state: string;
  to_state: string;
  reason: string | null;
};

/** The `session_calls` table: sessions' LLM and tool calls (`inspect.store_calls`). */
export type SessionCallsTable = {
  /** bigint identity: drivers may return it as a string. */
  id: ColumnType<string | number, never, never>;
  session_id: string;
  user_id: string;
  turn_id: string;
  kind: string;
  started_at: Date;
  /** The trace the call belongs to (tracing on, sampled); null otherwise. */
  trace_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** jsonb: the call (see `NewCallRecord`) without the columns above, written as JSON text, read back parsed. */
  body: ColumnType<Record<string, unknown>, string, string>;
};

/** The `memories` table (only present when long-term memory is on). */
export type MemoriesTable = {
  id: Generated<number>;
  user_id: string;
  session_id: string;
  content: string;
  /** pgvector `vector(n)`: written in its text form (`toSql`), never read back by the repositories. */
  embedding: ColumnType<number[] | string, string, string>;
  created_at: CreatedTimestamp;
};

/** The `memory_embedder` table: one row naming the embedder of the stored memories. */
export type MemoryEmbedderTable = {
  id: Generated<boolean>;
  source: string;
  model: string | null;
  recorded_at: CreatedTimestamp;
};

/** The `oauth_tokens` table: one user's encrypted tokens for one identity provider. */
export type OAuthTokensTable = {
  user_id: string;
  provider: string;
  /** The token set, AES-256-GCM encrypted by the runtime's token cipher (IV and tag inside). */
  ciphertext: string;
  expires_at: Date | null;
  scope: string | null;
  created_at: CreatedTimestamp;
  updated_at: CreatedTimestamp;
};

/** The `oauth_states` table: logins started and not yet finished, each usable once. */
export type OAuthStatesTable = {
  state: string;
  user_id: string;
  provider: string;
  code_verifier: string;
  nonce: string | null;
  /** SHA-256 (hex) of the login cookie set in the browser that started the login. */
  browser_binding: string;
  expires_at: Date;
  created_at: CreatedTimestamp;
};

/** The `webhook_subscriptions` table: where to send which events, and the HMAC secret. */
export type WebhookSubscriptionsTable = {
  id: string;
  url: string;
  /** jsonb array of event types (or `*`): written as JSON text, read back parsed. */
  events: ColumnType<string[], string, string>;
  secret: string;
  active: ColumnType<boolean, boolean | undefined, boolean>;
  /** The user whose events it receives; null: every user's (made with an admin key). */
  owner_user_id: ColumnType<string | null, string | null | undefined, never>;
  created_at: CreatedTimestamp;
  updated_at: CreatedTimestamp;
};

/** The `webhook_deliveries` table: the durable outbox, one row per event and subscription. */
export type WebhookDeliveriesTable = {
  /** bigint identity: drivers may return it as a string. */
  id: ColumnType<string | number | bigint, never, never>;
  delivery_id: string;
  subscription_id: string;
  agent_id: string | null;
  event: string;
  payload: string;
  status: ColumnType<string, string | undefined, string>;
  attempts: ColumnType<number, number | undefined, number>;
  next_attempt_at: CreatedTimestamp;
  last_status: number | null;
  last_error: string | null;
  created_at: CreatedTimestamp;
  delivered_at: Date | null;
  /** The process sending this delivery now, and until when its claim holds (null: nobody). */
  claimed_by: string | null;
  claimed_until: Date | null;
};

/** The `turn_steps` table: the completed steps of each session's running turn (see `TurnStepStore`). */
export type TurnStepsTable = {
  session_id: string;
  step: string;
  anchor: string;
  body: string;
  created_at: Generated<Date>;
};

/** The `idempotency_keys` table: each user's keys, the request each was first used with, and its answer. */
export type IdempotencyKeysTable = {
  user_id: string;
  idempotency_key: string;
  request_hash: string;
  state: 'running' | 'done';
  holder: string;
  lease_until: Date;
  expires_at: Date;
  /** The recorded answer, once done: status, headers (JSON text) and body. */
  status: number | null;
  headers: string | null;
  body: string | null;
};

/** Every table the service's Kysely instance knows. */
/** The `user_token_usage` table: the tokens each user's LLM calls used, by day (UTC), for the token budgets. */
export type UserTokenUsageTable = {
  user_id: string;
  /** The day, as the date type's text (`YYYY-MM-DD`). */
  day: string;
  /** bigint: drivers return it as a string. */
  prompt_tokens: ColumnType<string | number, number, number>;
  completion_tokens: ColumnType<string | number, number, number>;
};

export type DatabaseSchema = {
  conversations: ConversationsTable;
  sessions: SessionsTable;
  responses: ResponsesTable;
  background_runs: BackgroundRunsTable;
  response_events: ResponseEventsTable;
  session_leases: SessionLeasesTable;
  session_transitions: SessionTransitionsTable;
  session_calls: SessionCallsTable;
  memories: MemoriesTable;
  memory_embedder: MemoryEmbedderTable;
  oauth_tokens: OAuthTokensTable;
  oauth_states: OAuthStatesTable;
  webhook_subscriptions: WebhookSubscriptionsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  idempotency_keys: IdempotencyKeysTable;
  turn_steps: TurnStepsTable;
  user_token_usage: UserTokenUsageTable;
};
