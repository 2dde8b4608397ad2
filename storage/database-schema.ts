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

/** Every table the service's Kysely instance knows. */
export type DatabaseSchema = {
  conversations: ConversationsTable;
  sessions: SessionsTable;
  memories: MemoriesTable;
  oauth_tokens: OAuthTokensTable;
  oauth_states: OAuthStatesTable;
};
