/**
 * Storage: the database factory (PostgreSQL through `pg`, or the embedded PGlite), the
 * migrations, and the repositories implementing the runtime's storage ports.
 */
import type { ConversationStore, SessionStore, VectorMemoryStore } from '../runtime/ports.js';
import { createConversationRepository } from './conversation-repository.js';
import type { Database } from './create-database.js';
import { createMemoryRepository } from './memory-repository.js';
import { createSessionRepository } from './session-repository.js';

export { createDatabase, redactPassword } from './create-database.js';
export type { CreateDatabaseOptions, Database } from './create-database.js';
export { MEMORY_MIGRATION_TABLE, migrateToLatest } from './migrate.js';
export type { MigrateOptions, MigrationSummary } from './migrate.js';
export type { ConversationsTable, DatabaseSchema, MemoriesTable, SessionsTable } from './database-schema.js';
export { createConversationRepository, createMemoryRepository, createSessionRepository };

/** The stores the runtime is wired with; `memories` only when the database has vector support. */
export type Stores = {
  conversations: ConversationStore;
  sessions: SessionStore;
  memories?: VectorMemoryStore;
};

/** Every repository over one open (and migrated) database. */
export function createStores(database: Database): Stores {
  const stores: Stores = {
    conversations: createConversationRepository(database.db),
    sessions: createSessionRepository(database.db),
  };
  if (database.hasVector) stores.memories = createMemoryRepository(database.db);
  return stores;
}
