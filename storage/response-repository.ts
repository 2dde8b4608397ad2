import { CompiledQuery, type Kysely, type Selectable } from 'kysely';
import { GroupCommit } from './group-commit.js';
import { hotStatement } from './prepared-statements.js';
import type { ResponseEnd, ResponseRecord, ResponseStore } from '../runtime/ports.js';
import { databaseCalls } from './database-calls.js';
import type { DatabaseSchema, ResponsesTable } from './database-schema.js';
import { responseBodyOf } from './stored-response-body.js';

/**
 * Responses' ends and their sessions' state now: what continuing one needs, read on every
 * `previous_response_id`, so prepared, batched and without the responses' bodies.
 */
const ENDS_OF_RESPONSES = hotStatement(`select responses.id, responses.user_id, responses.session_id, responses.history_hash, responses.status,
    sessions.deleted_at is null and sessions.session_id is not null as session_live, sessions.history_hash as session_history_hash
  from responses left join sessions on sessions.session_id = responses.session_id
  where responses.id = any($1::varchar[])`);

/** A response and the ones before it (`previous_response_id`), at most $2, oldest first. */
const CHAIN_TO = `with recursive chain as (
    select responses.*, 1 as depth from responses where id = $1
    union all
    select earlier.*, chain.depth + 1 from responses earlier join chain on earlier.id = chain.previous_response_id
    where chain.depth < $2
  )
  select id, user_id, session_id, previous_response_id, history_hash, status, body, input, created_at from chain order by depth desc`;

type EndRow = { id: string; user_id: string; session_id: string; history_hash: string; status: string; session_live: boolean; session_history_hash: string | null };

function toEnd(row: EndRow): ResponseEnd {
  return {
    id: row.id,
    userId: row.user_id,
    sessionId: row.session_id,
    historyHash: row.history_hash,
    status: row.status,
    sessionLive: row.session_live,
    sessionHistoryHash: row.session_history_hash,
  };
}

/**
 * The responses table behind the runtime's ResponseStore port (a response is stored with its
 * turn's end: see the session repository). A call that fails while the database cannot be
 * reached fails with DATABASE_UNAVAILABLE (`databaseCalls`).
 */
export function createResponseRepository(db: Kysely<DatabaseSchema>): ResponseStore {
  // The reads of concurrent turns go together, as their writes do (one round trip for all).
  const ends = new GroupCommit<string, ResponseEnd | undefined>(async (ids) => {
    const { rows } = await db.executeQuery<EndRow>(CompiledQuery.raw(ENDS_OF_RESPONSES, [ids]));
    const byId = new Map(rows.map((row) => [row.id, toEnd(row)]));
    return ids.map((id) => byId.get(id));
  });
  return databaseCalls<ResponseStore>({
    async get(id) {
      const row = await db.selectFrom('responses').selectAll().where('id', '=', id).executeTakeFirst();
      return row && toRecord(row);
    },

    endOf(id) {
      return ends.run(id);
    },

    async newestEndingAt(sessionId, historyHash) {
      const row = await db
        .selectFrom('responses')
        .select('id')
        .where('session_id', '=', sessionId)
        .where('history_hash', '=', historyHash)
        .orderBy('created_at', 'desc')
        .limit(1)
        .executeTakeFirst();
      return row?.id;
    },

    async chainTo(id, limit) {
      const { rows } = await db.executeQuery<Selectable<ResponsesTable>>(CompiledQuery.raw(CHAIN_TO, [id, limit]));
      return rows.map(toRecord);
    },

    async remove(id) {
      const result = await db.deleteFrom('responses').where('id', '=', id).executeTakeFirst();
      return result.numDeletedRows > 0n;
    },
  });
}

function toRecord(row: Selectable<ResponsesTable>): ResponseRecord {
  return {
    id: row.id,
    userId: row.user_id,
    sessionId: row.session_id,
    previousResponseId: row.previous_response_id,
    historyHash: row.history_hash,
    body: responseBodyOf(row.id, row.status, JSON.parse(row.body) as Record<string, unknown>),
    input: JSON.parse(row.input) as Array<Record<string, unknown>>,
    createdAt: row.created_at,
  };
}
