import type { Kysely, Selectable } from 'kysely';
import type { ResponseRecord, ResponseStore } from '../runtime/ports.js';
import type { DatabaseSchema, ResponsesTable } from './database-schema.js';

/** The responses table behind the runtime's ResponseStore port (a response is stored with its turn's end: see the session repository). */
export function createResponseRepository(db: Kysely<DatabaseSchema>): ResponseStore {
  return {
    async get(id) {
      const row = await db.selectFrom('responses').selectAll().where('id', '=', id).executeTakeFirst();
      return row && toRecord(row);
    },

    async findEndingAt(sessionId, historyHash) {
      const row = await db
        .selectFrom('responses')
        .selectAll()
        .where('session_id', '=', sessionId)
        .where('history_hash', '=', historyHash)
        .orderBy('created_at', 'desc')
        .limit(1)
        .executeTakeFirst();
      return row && toRecord(row);
    },

    async remove(id) {
      const result = await db.deleteFrom('responses').where('id', '=', id).executeTakeFirst();
      return result.numDeletedRows > 0n;
    },
  };
}

function toRecord(row: Selectable<ResponsesTable>): ResponseRecord {
  return {
    id: row.id,
    userId: row.user_id,
    sessionId: row.session_id,
    previousResponseId: row.previous_response_id,
    historyHash: row.history_hash,
    body: row.body,
    input: row.input,
    createdAt: row.created_at,
  };
}
