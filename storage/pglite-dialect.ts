// Kysely dialect for the embedded database (PGlite).
//
// Kysely 0.29 ships one, but 0.29 declares Node 22 and the service runs on Node 20
// (README), so the service stays on Kysely 0.28 and keeps this dialect. It follows
// 0.29's `PGliteDialect` (MIT, Sami Koskimäki and contributors): PostgreSQL's adapter,
// compiler and introspector; one connection, used by one caller at a time; a
// transaction runs inside `pglite.transaction` so PGlite holds its own exclusive lock
// for it, as it does for anything else that talks to the same instance.
import type { PGlite, Transaction } from '@electric-sql/pglite';
import {
  CompiledQuery,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  type QueryCompiler,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';
import pg from 'pg';
import { PGlitePreparedStatements } from './pglite-prepared-statements.js';
import { hotStatementName } from './prepared-statements.js';

export class PGliteDialect implements Dialect {
  constructor(private readonly pglite: PGlite) {}

  createAdapter(): DialectAdapter {
    return new PGliteAdapter();
  }

  createDriver(): Driver {
    return new PGliteDriver(this.pglite);
  }

  createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new PostgresIntrospector(db);
  }

  createQueryCompiler(): QueryCompiler {
    return new PostgresQueryCompiler();
  }
}

/** The migrator holds the only connection from lock to release, so there is nothing to lock. */
class PGliteAdapter extends PostgresAdapter {
  override async acquireMigrationLock(): Promise<void> {}
  override async releaseMigrationLock(): Promise<void> {}
}

class PGliteDriver implements Driver {
  private readonly connection: PGliteConnection;
  private readonly turns = new ConnectionTurns();

  constructor(private readonly pglite: PGlite) {
    this.connection = new PGliteConnection(pglite);
  }

  async init(): Promise<void> {
    if (this.pglite.closed) throw new Error('PGlite instance is already closed.');
    await this.pglite.waitReady;
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    await this.turns.take();
    return this.connection;
  }

  async releaseConnection(): Promise<void> {
    this.turns.give();
  }

  async beginTransaction(_connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    await this.connection.begin(settings);
  }

  async commitTransaction(): Promise<void> {
    await this.connection.commit();
  }

  async rollbackTransaction(): Promise<void> {
    await this.connection.rollback();
  }

  async savepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`savepoint ${pg.escapeIdentifier(name)}`));
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`rollback to savepoint ${pg.escapeIdentifier(name)}`));
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`release savepoint ${pg.escapeIdentifier(name)}`));
  }

  async destroy(): Promise<void> {
    if (!this.pglite.closed) await this.pglite.close();
  }
}

/** Hands the one connection to one caller at a time, in the order they asked. */
class ConnectionTurns {
  private held = false;
  private readonly waiting: Array<() => void> = [];

  async take(): Promise<void> {
    if (!this.held) {
      this.held = true;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  give(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.held = false;
  }
}

interface OpenTransaction {
  tx: Transaction;
  finish: (outcome: 'commit' | 'rollback') => void;
  closed: Promise<void>;
}

class PGliteConnection implements DatabaseConnection {
  private open: OpenTransaction | undefined;

  private readonly prepared: PGlitePreparedStatements;

  constructor(private readonly pglite: PGlite) {
    this.prepared = new PGlitePreparedStatements(pglite);
  }

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    // The hot statements run on their own (group commit), never inside a transaction.
    const name = this.open ? undefined : hotStatementName(query.sql);
    const { affectedRows, rows } =
      name === undefined
        ? await (this.open?.tx ?? this.pglite).query<R>(query.sql, [...query.parameters], { rowMode: 'object' })
        : await this.prepared.query<R>(name, query.sql, query.parameters);
    return { numAffectedRows: affectedRows === undefined ? undefined : BigInt(affectedRows), rows: rows ?? [] };
  }

  // eslint-disable-next-line require-yield
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('Streaming is not supported by PGlite.');
  }

  async begin(settings: TransactionSettings): Promise<void> {
    let started!: (tx: Transaction) => void;
    const begun = new Promise<Transaction>((resolve) => (started = resolve));
    let finish!: (outcome: 'commit' | 'rollback') => void;
    const outcome = new Promise<'commit' | 'rollback'>((resolve) => (finish = resolve));
    const closed = this.pglite.transaction(async (tx) => {
      started(tx);
      if ((await outcome) === 'rollback') await tx.rollback();
    });
    // A transaction that cannot start rejects `closed` before `begun` settles.
    const tx = await Promise.race([begun, closed.then(() => Promise.reject(new Error('PGlite transaction ended before it began')))]);
    this.open = { tx, finish, closed };
    const characteristics = transactionCharacteristics(settings);
    if (characteristics) await tx.query(`set transaction ${characteristics}`);
  }

  async commit(): Promise<void> {
    await this.close('commit');
  }

  async rollback(): Promise<void> {
    await this.close('rollback').catch(() => {});
  }

  private async close(outcome: 'commit' | 'rollback'): Promise<void> {
    const open = this.open;
    if (!open) return;
    this.open = undefined;
    open.finish(outcome);
    await open.closed;
  }
}

function transactionCharacteristics(settings: TransactionSettings): string {
  const parts: string[] = [];
  if (settings.isolationLevel) parts.push(`isolation level ${settings.isolationLevel}`);
  if (settings.accessMode) parts.push(settings.accessMode);
  return parts.join(', ');
}
