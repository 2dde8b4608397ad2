import { CompiledQuery, sql } from 'kysely';
import type { Kysely, Selectable } from 'kysely';
import type { ConversationRecord, ConversationStore, NewConversationRecord } from '../runtime/ports.js';
import type { ConversationsTable, DatabaseSchema } from './database-schema.js';
import { GroupCommit } from './group-commit.js';
import { hotStatement } from './prepared-statements.js';
import { rowLimit } from './row-limit.js';
import { databaseCalls } from './database-calls.js';

/**
 * An insert of conversation rows given as four arrays (`recordColumns`) in the parameters
 * from `$first` on, stored in the arrays' order (ids follow it). Its text is the same whatever
 * the number of rows, so it is never rebuilt.
 */
export function insertRecordColumns(first: number): string {
  const [users, sessions, roles, messages] = [first, first + 1, first + 2, first + 3];
  return `insert into conversations (user_id, session_id, role, message)
  select item.user_id, item.session_id, item.role, item.message
  from unnest($${users}::varchar[], $${sessions}::varchar[], $${roles}::varchar[], $${messages}::text[]) with ordinality as item(user_id, session_id, role, message, position)
  order by item.position`;
}

/** Records as the four column arrays `insertRecordColumns` takes. */
export function recordColumns(records: NewConversationRecord[]): [string[], string[], string[], string[]] {
  return [
    records.map((record) => record.userId),
    records.map((record) => record.sessionId),
    records.map((record) => record.role),
    records.map((record) => record.message),
  ];
}

const APPEND = hotStatement(`${insertRecordColumns(1)}
  returning id, user_id, session_id, role, message, created_at`);

/** The conversation table behind the runtime's ConversationStore port. */
export function createConversationRepository(db: Kysely<DatabaseSchema>): ConversationStore {
  // The appends of concurrent turns commit together (group commit).
  const appends = new GroupCommit<NewConversationRecord[], ConversationRecord[]>(async (batches) => {
    const records = batches.flat();
    const { rows } = await db.executeQuery<Selectable<ConversationsTable>>(
      CompiledQuery.raw(APPEND, recordColumns(records)),
    );
    // Ids follow the insertion order, whatever order RETURNING uses.
    const stored = rows.map(toRecord).sort((a, b) => a.id - b.id);
    let next = 0;
    return batches.map((batch) => stored.slice(next, (next += batch.length)));
  });
  return databaseCalls<ConversationStore>({
    async append(records: NewConversationRecord[]): Promise<ConversationRecord[]> {
      if (records.length === 0) return [];
      return appends.run(records);
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

    async firstUserMessages(sessionIds: readonly string[]): Promise<Map<string, string>> {
      if (sessionIds.length === 0) return new Map();
      const rows = await db
        .selectFrom('conversations')
        .distinctOn('session_id')
        .select(['session_id', 'message'])
        .where('session_id', 'in', [...sessionIds])
        .where('role', '=', 'user')
        .orderBy('session_id')
        .orderBy('id')
        .execute();
      return new Map(rows.map((row) => [row.session_id, row.message]));
    },

    async page(sessionId: string, options: { afterId?: number; limit: number; order?: 'asc' | 'desc' }): Promise<ConversationRecord[]> {
      const count = rowLimit(options.limit);
      if (count === 0) return [];
      const order = options.order ?? 'asc';
      let query = db.selectFrom('conversations').selectAll().where('session_id', '=', sessionId);
      // As bigint: an id past the integer column's range matches nothing rather than failing.
      if (options.afterId !== undefined) query = query.where('id', order === 'asc' ? '>' : '<', sql<number>`${options.afterId}::bigint`);
      const rows = await query.orderBy('id', order).limit(count).execute();
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
  });
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
