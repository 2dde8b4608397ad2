import type { Kysely, Selectable } from 'kysely';
import type { CallRecord, CallStore, NewCallRecord } from '../runtime/ports.js';
import type { DatabaseSchema, SessionCallsTable } from './database-schema.js';
import { toJsonText } from '../runtime/json-text.js';
import { rowLimit } from './row-limit.js';
import { databaseCalls } from './database-calls.js';

/** The `session_calls` table behind the runtime's CallStore port (`inspect.store_calls`). */
export function createCallRepository(db: Kysely<DatabaseSchema>): CallStore {
  return databaseCalls<CallStore>({
    async append(records: NewCallRecord[]): Promise<void> {
      if (records.length === 0) return;
      await db.insertInto('session_calls').values(records.map(toRow)).execute();
    },

    async page(sessionId: string, options: { afterId?: number; limit: number }): Promise<CallRecord[]> {
      const count = rowLimit(options.limit);
      if (count === 0) return [];
      let query = db.selectFrom('session_calls').selectAll().where('session_id', '=', sessionId);
      if (options.afterId !== undefined) query = query.where('id', '>', options.afterId);
      const rows = await query.orderBy('id').limit(count).execute();
      return rows.map(toCall);
    },

    async deleteSession(sessionId: string): Promise<number> {
      const result = await db.deleteFrom('session_calls').where('session_id', '=', sessionId).executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  });
}

/** A NUL character, which PostgreSQL's jsonb refuses even escaped. */
const NUL = /\u0000/g;

function toRow(record: NewCallRecord) {
  const { sessionId, userId, turnId, kind, startedAt, traceId, ...rest } = record;
  const text = toJsonText(rest);
  // A tool's result or a message may hold a NUL: stored as U+FFFD rather than failing the write.
  const body = text.includes('\\u0000') ? JSON.stringify(rest, (_key, item: unknown) => (typeof item === 'string' ? item.replace(NUL, '\uFFFD') : item)) : text;
  return { session_id: sessionId, user_id: userId, turn_id: turnId, kind, started_at: startedAt, trace_id: traceId ?? null, body };
}

function toCall(row: Selectable<SessionCallsTable>): CallRecord {
  return {
    ...(row.body as Omit<NewCallRecord, 'sessionId' | 'userId' | 'turnId' | 'kind' | 'startedAt' | 'traceId'>),
    id: Number(row.id),
    // A call made with tracing off has no trace: its record has none, as the one kept in memory.
    ...(row.trace_id !== null ? { traceId: row.trace_id } : {}),
    sessionId: row.session_id,
    userId: row.user_id,
    turnId: row.turn_id,
    kind: row.kind,
    startedAt: row.started_at,
  } as CallRecord;
}
