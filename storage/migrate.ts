import { Migrator, sql, type Kysely, type Migration } from 'kysely';
import type { Database } from './create-database.js';
import { coreMigrations, createMemoryMigrations } from './migrations.js';

/** What `migrateToLatest` needs to know about the deployment. */
export type MigrateOptions = {
  /** Long-term memory is on: create the `memories` table (needs pgvector). */
  vector: boolean;
  /** Dimensions of the stored embeddings (pgvector's HNSW index takes up to 2000). */
  embeddingDimensions: number;
};

/** The migrations a run applied, as `<track>/<name>` (empty when the schema was current). */
export type MigrationSummary = { applied: string[] };

/** Name of the table recording the memory track's migrations (the core track uses Kysely's default). */
export const MEMORY_MIGRATION_TABLE = 'kysely_migration_memory';

const MAX_HNSW_DIMENSIONS = 2000;

/**
 * Brings the schema up to date. Safe to run again and from several processes at once:
 * on PostgreSQL Kysely holds an advisory lock while it migrates, and PGlite has a single
 * connection.
 */
export async function migrateToLatest(database: Database, options: MigrateOptions): Promise<MigrationSummary> {
  const { db } = database;
  if (options.vector) assertDimensions(options.embeddingDimensions);
  // The migration bookkeeping lives beside the tables, in the first schema of the search path.
  const schema = await currentSchema(db);
  if (options.vector) await assertVectorAvailable(database);

  const applied = await runTrack(db, 'core', coreMigrations, { migrationTableSchema: schema });
  if (options.vector) {
    applied.push(
      ...(await runTrack(db, 'memory', createMemoryMigrations(options.embeddingDimensions), {
        migrationTableSchema: schema,
        migrationTableName: MEMORY_MIGRATION_TABLE,
      })),
    );
    await assertEmbeddingDimensions(db, options.embeddingDimensions);
  }
  return { applied };
}

async function runTrack(
  db: Kysely<any>,
  track: string,
  migrations: Record<string, Migration>,
  placement: { migrationTableSchema: string; migrationTableName?: string },
): Promise<string[]> {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations }, ...placement });
  const { error, results = [] } = await migrator.migrateToLatest();
  if (error !== undefined) {
    const failed = results.find((result) => result.status === 'Error')?.migrationName;
    const reason = error instanceof Error ? error.message : String(error);
    const where = failed ? `migration ${track}/${failed}` : `the ${track} migrations`;
    throw new Error(`Database migration failed in ${where}: ${reason}`, { cause: error });
  }
  return results.filter((result) => result.status === 'Success').map((result) => `${track}/${result.migrationName}`);
}

async function currentSchema(db: Kysely<any>): Promise<string> {
  const { rows } = await sql<{ schema: string | null }>`select current_schema() as schema`.execute(db);
  const schema = rows[0]?.schema;
  if (!schema) throw new Error('The database search_path names no existing schema to create the tables in.');
  return schema;
}

function assertDimensions(dimensions: number): void {
  if (!Number.isInteger(dimensions) || dimensions < 1 || dimensions > MAX_HNSW_DIMENSIONS) {
    throw new Error(
      `Embedding dimensions must be an integer from 1 to ${MAX_HNSW_DIMENSIONS} (pgvector's HNSW index limit); got ${dimensions}.`,
    );
  }
}

async function assertVectorAvailable(database: Database): Promise<void> {
  const { rows } = await sql<{ available: boolean; version: string }>`
    select exists (select 1 from pg_available_extensions where name = 'vector') as available,
           current_setting('server_version') as version`.execute(database.db);
  const row = rows[0];
  if (row?.available) return;
  const where =
    database.kind === 'pglite'
      ? 'The embedded PGlite database was opened without pgvector, so it has no "vector" extension available'
      : `The PostgreSQL server (version ${row?.version ?? 'unknown'}) has no "vector" extension (pgvector) available`;
  throw new Error(
    `${where}, and long-term memory (memory.use_long_term / MEMORY_USE_LONG_TERM) needs it to store embeddings. ` +
      (database.kind === 'pglite'
        ? 'Open it with vector support.'
        : 'Install pgvector on that server, use a database that has it, or switch long-term memory off.'),
  );
}

/** The table keeps the dimensions it was created with; a changed setting would fail every insert. */
async function assertEmbeddingDimensions(db: Kysely<any>, dimensions: number): Promise<void> {
  const { rows } = await sql<{ type: string }>`
    select format_type(atttypid, atttypmod) as type from pg_attribute
    where attrelid = 'memories'::regclass and attname = 'embedding' and not attisdropped`.execute(db);
  const type = rows[0]?.type;
  if (type !== `vector(${dimensions})`) {
    throw new Error(
      `The memories table stores embeddings as ${type ?? 'nothing'}, but the configured embedding dimensions are ${dimensions}. ` +
        `Set them back, or drop the memories and ${MEMORY_MIGRATION_TABLE} tables (losing long-term memory) so the next start recreates them.`,
    );
  }
}
