import { sql, type Kysely } from 'kysely';
import type { DatabaseSchema } from './database-schema.js';

/** Autovacuum's default analyze rule: 50 rows plus 10% of the table since the last ANALYZE. */
const BASE_THRESHOLD = 50;
const SCALE_FACTOR = 0.1;

type TableState = { rowsAtAnalyze: number; writtenSince: number; analyzing: boolean };

/**
 * Autovacuum's analyze, run by the service: once the rows it wrote to a table since its last
 * ANALYZE reach 50 + 10% of the rows the table had then, the table is analyzed again in the
 * background. PGlite runs no autovacuum; a server's may be off, or come round only after its
 * naptime (a minute by default). Without fresh statistics the planner guesses, and a vector
 * search can pick a full sort of a user's memories over the HNSW index (82 ms against 4 ms
 * at 100,000 memories on the server in the recall bench).
 */
export class AutoAnalyze {
  private readonly tables = new Map<string, TableState>();
  private readonly running = new Set<Promise<void>>();
  private closed = false;

  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly onError: (error: Error) => void,
  ) {}

  /** `rows` rows of `table` were inserted, updated or deleted. */
  wrote(table: string, rows: number): void {
    const state = this.tables.get(table) ?? this.track(table);
    state.writtenSince += rows;
    if (state.writtenSince >= BASE_THRESHOLD + SCALE_FACTOR * state.rowsAtAnalyze) this.run(state, () => this.analyzeNow(table, state));
  }

  /** Resolves when the analyses running now have ended. */
  async settled(): Promise<void> {
    await Promise.all(this.running);
  }

  /** Waits for the analyses running now; none starts after. */
  async close(): Promise<void> {
    this.closed = true;
    await this.settled();
  }

  /** A table seen for the first time: analyzed now when it never was (a database from before, or a new one). */
  private track(table: string): TableState {
    const state: TableState = { rowsAtAnalyze: 0, writtenSince: 0, analyzing: false };
    this.tables.set(table, state);
    this.run(state, async () => {
      const reltuples = await this.rowsCounted(table);
      if (reltuples >= 0) state.rowsAtAnalyze = reltuples;
      else await this.analyzeNow(table, state);
    });
    return state;
  }

  private async analyzeNow(table: string, state: TableState): Promise<void> {
    const written = state.writtenSince;
    await sql`analyze ${sql.table(table)}`.execute(this.db);
    state.rowsAtAnalyze = Math.max(0, await this.rowsCounted(table));
    // Writes that arrived during the ANALYZE count towards the next one.
    state.writtenSince -= written;
  }

  /** The rows the table's last ANALYZE counted; -1 when it never was analyzed (or does not exist). */
  private async rowsCounted(table: string): Promise<number> {
    const { rows } = await sql<{ reltuples: number }>`select reltuples from pg_class where oid = to_regclass(${table})`.execute(this.db);
    return Number(rows[0]?.reltuples ?? -1);
  }

  /** Runs one job of a table at a time in the background; errors go to `onError`. */
  private run(state: TableState, job: () => Promise<void>): void {
    if (this.closed || state.analyzing) return;
    state.analyzing = true;
    const done = job()
      .catch((error: unknown) => this.onError(error instanceof Error ? error : new Error(String(error))))
      .finally(() => {
        state.analyzing = false;
        this.running.delete(done);
      });
    this.running.add(done);
  }
}
