import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { toSql } from 'pgvector';
import type { MemoryEntry, VectorMemoryStore } from '../runtime/ports.js';
import type { DatabaseSchema } from './database-schema.js';
import { rowLimit } from './row-limit.js';

/** Long-term vector memory in the `memories` table (pgvector), behind the VectorMemoryStore port. */
export function createMemoryRepository(db: Kysely<DatabaseSchema>): VectorMemoryStore {
  const entryColumns = ['id', 'user_id', 'session_id', 'content', 'created_at'] as const;

  return {
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
      return rows.map(toEntry).sort((a, b) => a.id - b.id);
    },

    async search(userId: string, embedding: number[], limit: number): Promise<Array<MemoryEntry & { distance: number }>> {
      const count = rowLimit(limit);
      if (count === 0) return [];
      const distance = sql<number>`embedding <=> ${vectorText(embedding)}::vector`;
      const rows = await db
        .selectFrom('memories')
        .select(entryColumns)
        .select(distance.as('distance'))
        .where('user_id', '=', userId)
        // Exactly the HNSW index's ordering, so the planner can use it (a tie-breaker would not).
        .orderBy('distance')
        .limit(count)
        .execute();
      return rows.map((row) => ({ ...toEntry(row), distance: Number(row.distance) }));
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
      return Number(result.numDeletedRows);
    },
  };
}

/** pgvector's text form of an embedding; rejects what would not be a vector. */
function vectorText(embedding: number[]): string {
  if (embedding.length === 0 || !embedding.every(Number.isFinite)) {
    throw new TypeError('An embedding must be a non-empty array of finite numbers.');
  }
  return toSql(embedding) as string;
}

function toEntry(row: { id: number; user_id: string; session_id: string; content: string; created_at: Date }): MemoryEntry {
  return { id: row.id, userId: row.user_id, sessionId: row.session_id, content: row.content, createdAt: row.created_at };
}
