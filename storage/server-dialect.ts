import { PostgresAdapter, PostgresDialect, sql, type DialectAdapter, type Kysely } from 'kysely';

/**
 * Kysely's own key for the migration lock: a process of an earlier version, which takes it as
 * a session lock, and this one still exclude each other.
 */
const MIGRATION_LOCK_KEY = 3853314791062309107n;

/**
 * Kysely's dialect for a PostgreSQL server, whose migrations hold their lock for as long as
 * one transaction, not one connection. Kysely takes a session lock (`pg_advisory_lock`), then
 * runs the migrations in a transaction, then unlocks, each on the connection it was given:
 * behind PgBouncer in transaction mode those are three server processes, and the one that took
 * the lock keeps it for as long as PgBouncer keeps that process, so the next start waits.
 */
export class ServerDialect extends PostgresDialect {
  override createAdapter(): DialectAdapter {
    return new TransactionLockedMigrations();
  }
}

/** Migrations in one transaction that begins by taking the lock (`pg_advisory_xact_lock`) and ends by committing, which frees it. */
class TransactionLockedMigrations extends PostgresAdapter {
  /** The lock's transaction holds the migrations: the migrator must not open one of its own (it would be a second, on another server process). */
  override get supportsTransactionalDdl(): boolean {
    return false;
  }

  override async acquireMigrationLock(db: Kysely<any>): Promise<void> {
    await sql`begin`.execute(db);
    await sql`select pg_advisory_xact_lock(${sql.lit(MIGRATION_LOCK_KEY)})`.execute(db);
  }

  /** Called after the migrations whatever happened: a transaction a failed migration aborted ends in a rollback at its commit. */
  override async releaseMigrationLock(db: Kysely<any>): Promise<void> {
    await sql`commit`.execute(db);
  }
}
