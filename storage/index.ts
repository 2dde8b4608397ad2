/**
 * Storage: the database factory (PostgreSQL through `pg`, or the embedded PGlite), the
 * migrations, and the repositories implementing the runtime's storage ports.
 */
import type {
  BackgroundResponseStore,
  ConversationStore,
  EmbedderRecordStore,
  IdempotencyKeyStore,
  OAuthStateStore,
  ResponseStore,
  SessionStore,
  TokenStore,
  TokenUsageStore,
  TurnStepStore,
  VectorMemoryStore,
} from '../runtime/ports.js';
import { createBackgroundResponseRepository } from './background-response-repository.js';
import { createConversationRepository } from './conversation-repository.js';
import type { Database } from './create-database.js';
import { createEmbedderRecordRepository } from './embedder-record-repository.js';
import { createIdempotencyKeyRepository } from './idempotency-key-repository.js';
import { createMemoryRepository, type MemoryRepositoryOptions } from './memory-repository.js';
import { createOAuthStateRepository } from './oauth-state-repository.js';
import { createResponseRepository } from './response-repository.js';
import { createSessionRepository } from './session-repository.js';
import { createTokenRepository } from './token-repository.js';
import { createTokenUsageRepository } from './token-usage-repository.js';
import { createTurnStepRepository } from './turn-step-repository.js';

export { createDatabase, DEFAULT_POOL_SIZE, describeDatabase, redactPassword } from './create-database.js';
export { DataDirInUseError } from './data-dir-lock.js';
export type { CreateDatabaseOptions, Database } from './create-database.js';
export { MEMORY_MIGRATION_TABLE, migrateToLatest } from './migrate.js';
export type { MigrateOptions, MigrationSummary } from './migrate.js';
export type { ConversationsTable, DatabaseSchema, MemoriesTable, OAuthStatesTable, OAuthTokensTable, SessionsTable } from './database-schema.js';
export { reembedMemories } from './embedder-record-repository.js';
export { createBackgroundResponseRepository, createConversationRepository, createEmbedderRecordRepository, createIdempotencyKeyRepository, createMemoryRepository, createOAuthStateRepository, createResponseRepository, createSessionRepository, createTokenRepository, createTokenUsageRepository, createTurnStepRepository };

/** The stores the runtime is wired with; `memories` only when the database has vector support. */
export type Stores = {
  conversations: ConversationStore;
  sessions: SessionStore;
  /** The Responses API's stored responses. */
  responses: ResponseStore;
  /** Background responses' runs and streaming events. */
  backgroundResponses: BackgroundResponseStore;
  /** Users' OAuth tokens (encrypted by the runtime before they get here). */
  tokens: TokenStore;
  /** Pending OAuth logins. */
  oauthStates: OAuthStateStore;
  /** Requests' idempotency keys and their recorded answers. */
  idempotencyKeys: IdempotencyKeyStore;
  /** The completed steps of sessions' running turns. */
  turnSteps: TurnStepStore;
  /** Each user's tokens by day, for the token budgets. */
  tokenUsage: TokenUsageStore;
  memories?: VectorMemoryStore;
  /** Which embedder made the stored memories; with `memories`. */
  memoryEmbedder?: EmbedderRecordStore;
};

/** Every repository over one open (and migrated) database. */
export function createStores(database: Database, options: { memory?: Pick<MemoryRepositoryOptions, 'efSearch'> } = {}): Stores {
  const { autoAnalyze } = database;
  // The turn's statements are prepared once per connection, and the generic plan of their joins
  // with these tables is chosen from the statistics of then: planned on a new database's near
  // empty tables, a scan of every session ever started, each turn, until the tables are analyzed.
  const onNewSessions = (count: number) => {
    autoAnalyze.wrote('sessions', count);
    autoAnalyze.wrote('session_leases', count);
  };
  const stores: Stores = {
    conversations: createConversationRepository(database.db),
    sessions: createSessionRepository(database.db, { onNewSessions }),
    responses: createResponseRepository(database.db),
    backgroundResponses: createBackgroundResponseRepository(database.db),
    tokens: createTokenRepository(database.db),
    oauthStates: createOAuthStateRepository(database.db),
    idempotencyKeys: createIdempotencyKeyRepository(database.db),
    turnSteps: createTurnStepRepository(database.db),
    tokenUsage: createTokenUsageRepository(database.db),
  };
  if (database.hasVector) {
    stores.memories = createMemoryRepository(database.db, { ...options.memory, onWrite: (rows) => autoAnalyze.wrote('memories', rows) });
    stores.memoryEmbedder = createEmbedderRecordRepository(database.db);
  }
  return stores;
}

export { createWebhookRepository } from './webhook-repository.js';
