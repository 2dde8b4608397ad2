import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { toSql } from 'pgvector';
import type { MemoryEntry, VectorMemoryStore } from '../runtime/ports.js';
import type { DatabaseSchema } from './database-schema.js';
import { rowLimit } from './row-limit.js';
import { databaseCalls } from './database-calls.js';

/**
 * Up to this many memories, a user's search measures every one of them (found through the
 * `user_id` index, then sorted): exact, and cheaper than walking the HNSW graph past other
 * users' memories, which pgvector's filtered scan may give up on before it finds them.
 */
export const EXACT_SEARCH_UP_TO = 1_000;

export type MemoryRepositoryOptions = {
  /** Users with at most this many memories are searched exactly (default EXACT_SEARCH_UP_TO). */
  exactSearchUpTo?: number;
  /**
   * Candidates an HNSW search keeps (`hnsw.ef_search`, 1 to 1000), set for each search alone
   * (`SET LOCAL`): more finds more of the exact nearest memories and takes longer. Unset: the
   * server's setting (pgvector's default is 40).
   */
  efSearch?: number;
  /** Told how many memories each write added or removed (the embedded database's AutoAnalyze). */
  onWrite?: (rows: number) => void;
};

const entryColumns = ['id', 'user_id', 'session_id', 'content', 'created_at'] as const;

/** Long-term vector memory in the `memories` table (pgvector), behind the VectorMemoryStore port. */
export function createMemoryRepository(db: Kysely<DatabaseSchema>, options: MemoryRepositoryOptions = {}): VectorMemoryStore {
  const exactSearchUpTo = options.exactSearchUpTo ?? EXACT_SEARCH_UP_TO;

  async function hasMoreThan(userId: string, memories: number): Promise<boolean> {
    const row = await db
      .selectFrom((eb) => eb.selectFrom('memories').select('id').where('user_id', '=', userId).limit(memories + 1).as('some'))
      .select(sql<number>`count(*)::int`.as('count'))
      .executeTakeFirstOrThrow();
    return Number(row.count) > memories;
  }

  /** The planner's choice; with fresh statistics and many memories of the user, the HNSW index, searched with `efSearch`. */
  function nearestByIndex(userId: string, query: string, count: number): Promise<Array<MemoryEntry & { distance: number }>> {
    const efSearch = options.efSearch;
    if (efSearch === undefined) return nearestByIndexIn(db, userId, query, count);
    return withEfSearch(db, efSearch, (trx) => nearestByIndexIn(trx, userId, query, count));
  }

  async function nearestByIndexIn(executor: Kysely<DatabaseSchema>, userId: string, query: string, count: number): Promise<Array<MemoryEntry & { distance: number }>> {
    const rows = await executor
      .selectFrom('memories')
      .select(entryColumns)
      .select(sql<number>`embedding <=> ${query}::vector`.as('distance'))
      .where('user_id', '=', userId)
      // Exactly the HNSW index's ordering, so the planner can use it (a tie-breaker would not).
      .orderBy('distance')
      .limit(count)
      .execute();
    return rows.map(toFoundEntry);
  }

  /** Every memory of the user measured: the materialized set keeps the planner off the HNSW index. */
  async function nearestExactly(userId: string, query: string, count: number): Promise<Array<MemoryEntry & { distance: number }>> {
    const rows = await db
      .with(
        (cte) => cte('mine').materialized(),
        (qb) => qb.selectFrom('memories').select(entryColumns).select(sql<number>`embedding <=> ${query}::vector`.as('distance')).where('user_id', '=', userId),
      )
      .selectFrom('mine')
      .selectAll()
      .orderBy('distance')
      .orderBy('id')
      .limit(count)
      .execute();
    return rows.map(toFoundEntry);
  }

  return databaseCalls<VectorMemoryStore>({
    async add(entries): Promise<MemoryEntry[]> {
      if (entries.length === 0) return [];
      const rows = await db
        .insertInto('memories')
        .values(
          entries.map((entry) => ({
            user_id: entry.userId,
            session_id: entry.sessionId,
            content: entry.content,
            embedding: vectorText(entry.embedding),
          })),
        )
        .returning(entryColumns)
        .execute();
      options.onWrite?.(rows.length);
      return rows.map(toEntry).sort((a, b) => a.id - b.id);
    },

    async search(userId: string, embedding: number[], limit: number): Promise<Array<MemoryEntry & { distance: number }>> {
      const count = rowLimit(limit);
      if (count === 0) return [];
      const query = vectorText(embedding);
      if (!(await hasMoreThan(userId, exactSearchUpTo))) return nearestExactly(userId, query, count);
      const approximate = await nearestByIndex(userId, query, count);
      // The HNSW scan gives up after hnsw.max_scan_tuples of other users' memories: a user
      // this rare in a big table is measured exactly rather than answered short.
      return approximate.length === count ? approximate : nearestExactly(userId, query, count);
    },

    async countBySession(sessionId: string): Promise<number> {
      const row = await db
        .selectFrom('memories')
        .select(sql<number>`count(*)::int`.as('count'))
        .where('session_id', '=', sessionId)
        .executeTakeFirstOrThrow();
      return Number(row.count);
    },

    async listBySession(sessionId: string): Promise<MemoryEntry[]> {
      const rows = await db.selectFrom('memories').select(entryColumns).where('session_id', '=', sessionId).orderBy('id').execute();
      return rows.map(toEntry);
    },

    async deleteBySession(sessionId: string): Promise<number> {
      const result = await db.deleteFrom('memories').where('session_id', '=', sessionId).executeTakeFirst();
      const deleted = Number(result.numDeletedRows);
      options.onWrite?.(deleted);
      return deleted;
    },
  });
}

/**
 * Runs `work` in a transaction whose HNSW searches keep `efSearch` candidates
 * (`hnsw.ef_search`, set local to it: the pool's connections keep the server's setting).
 */
export function withEfSearch<T>(db: Kysely<DatabaseSchema>, efSearch: number, work: (trx: Kysely<DatabaseSchema>) => Promise<T>): Promise<T> {
  return db.transaction().execute(async (trx) => {
    await sql`select set_config('hnsw.ef_search', ${String(efSearch)}, true)`.execute(trx);
    return work(trx);
  });
}

/** pgvector's text form of an embedding; rejects what would not be a vector. */
export function vectorText(embedding: number[]): string {
  if (embedding.length === 0 || !embedding.every(Number.isFinite)) {
    throw new TypeError('An embedding must be a non-empty array of finite numbers.');
  }
  return toSql(embedding) as string;
}

function toFoundEntry(row: Parameters<typeof toEntry>[0] & { distance: number }): MemoryEntry & { distance: number } {
  return { ...toEntry(row), distance: Number(row.distance) };
}

function toEntry(row: { id: number; user_id: string; session_id: string; content: string; created_at: Date }): MemoryEntry {
  return { id: row.id, userId: row.user_id, sessionId: row.session_id, content: row.content, createdAt: row.created_at };
}
