import { sql } from 'kysely';
import type { Kysely, Selectable } from 'kysely';
import type { ConversationRecord, ConversationStore, NewConversationRecord } from '../runtime/ports.js';
import type { ConversationsTable, DatabaseSchema } from './database-schema.js';
import { rowLimit } from './row-limit.js';

/** The conversation table behind the runtime's ConversationStore port. */
export function createConversationRepository(db: Kysely<DatabaseSchema>): ConversationStore {
  return {
    async append(records: NewConversationRecord[]): Promise<ConversationRecord[]> {
      if (records.length === 0) return [];
      // One statement is one transaction; PostgreSQL numbers the VALUES rows in the given order.
      const rows = await db
        .insertInto('conversations')
        .values(
          records.map(toConversationRow),
        )
        .returningAll()
        .execute();
      // Ids follow the VALUES order, so id order is the given order whatever order RETURNING uses.
      return rows.map(toRecord).sort((a, b) => a.id - b.id);
    },

    async recent(sessionId: string, limit: number): Promise<ConversationRecord[]> {
      const count = rowLimit(limit);
      if (count === 0) return [];
      const rows = await db
        .selectFrom('conversations')
        .selectAll()
        .where('session_id', '=', sessionId)
        .orderBy('id', 'desc')
        .limit(count)
        .execute();
      return rows.reverse().map(toRecord);
    },

    async page(sessionId: string, options: { afterId?: number; limit: number }): Promise<ConversationRecord[]> {
      const count = rowLimit(options.limit);
      if (count === 0) return [];
      let query = db.selectFrom('conversations').selectAll().where('session_id', '=', sessionId);
      // As bigint: an id past the integer column's range matches nothing rather than failing.
      if (options.afterId !== undefined) query = query.where('id', '>', sql<number>`${options.afterId}::bigint`);
      const rows = await query.orderBy('id', 'asc').limit(count).execute();
      return rows.map(toRecord);
    },

    async count(sessionId: string): Promise<number> {
      const row = await db
        .selectFrom('conversations')
        .select(sql<number>`count(*)::int`.as('count'))
        .where('session_id', '=', sessionId)
        .executeTakeFirstOrThrow();
      return Number(row.count);
    },

    async deleteSession(sessionId: string): Promise<number> {
      const result = await db.deleteFrom('conversations').where('session_id', '=', sessionId).executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}

function toRecord(row: Selectable<ConversationsTable>): ConversationRecord {
  return {
    id: row.id,
    userId: row.user_id,
    sessionId: row.session_id,
    role: row.role,
    message: row.message,
    createdAt: row.created_at,
  };
}

/** A conversation record as a row to insert. */
export function toConversationRow(record: NewConversationRecord) {
  return { user_id: record.userId, session_id: record.sessionId, role: record.role, message: record.message };
}
