import { CompiledQuery, sql } from 'kysely';
import type { Kysely, Selectable } from 'kysely';
import type { LeaseFence, NewConversationRecord, SessionCursor, SessionPage, SessionProgress, SessionRecord, SessionStore, StoredTransition } from '../runtime/ports.js';
import { insertRecordColumns, recordColumns } from './conversation-repository.js';
import { toJsonText } from './json-text.js';
import type { DatabaseSchema, SessionsTable, SessionTransitionsTable } from './database-schema.js';
import { rowLimit } from './row-limit.js';

/** A snapshot as stored: JSON text with lone surrogates replaced, or null. */
function snapshotText(progress: SessionProgress): string | null {
  return progress.snapshot === undefined || progress.snapshot === null ? null : toJsonText(progress.snapshot);
}

/**
 * The end of a turn in one statement of fixed text (never rebuilt, one round trip). As CTEs
 * see the session row as it was before the statement: the transition log in its order,
 * unless the session is deleted or its stored transition count already reached the
 * progress's (a retry of a write that did commit); the turn's rows in order; then the
 * progress on the session row unless it is deleted. The fenced form stores the progress only
 * while the lease is the one the turn ran under, and share-locks the lease row until commit,
 * so a process taking the lease meanwhile waits and then reads this turn's rows. The rows are
 * stored either way (their client had the answer).
 */
const COMPLETE_TURN = `with turn as (
    select $1::varchar as session_id, $3::integer as transitions
  ), logged as (
    insert into session_transitions (session_id, at, from_state, to_state, reason)
    select turn.session_id, log.at, log.from_state, log.to_state, log.reason
    from turn, rows from (jsonb_to_recordset($2::jsonb) as (at timestamptz, from_state varchar, to_state varchar, reason text)) with ordinality as log(at, from_state, to_state, reason, position)
    where exists (select 1 from sessions, turn where sessions.session_id = turn.session_id and deleted_at is null and sessions.transitions < turn.transitions)
    order by log.position
  ), stored as (
    ${insertRecordColumns(4)}
  )
  update sessions set snapshot = $8::jsonb, current_state = $9::varchar, transitions = turn.transitions, history_hash = $10::text, last_active = now()
  from turn
  where sessions.session_id = turn.session_id and sessions.deleted_at is null`;
const COMPLETE_TURN_FENCED = `${COMPLETE_TURN}
  and exists (select 1 from session_leases where session_leases.session_id = turn.session_id and holder = $11::varchar and generation = $12::bigint for share of session_leases)`;

function transitionLogJson(progress: SessionProgress): string {
  return JSON.stringify((progress.transitionLog ?? []).map((entry) => ({ at: entry.at, from_state: entry.from, to_state: entry.to, reason: entry.reason })));
}

/** The sessions table behind the runtime's SessionStore port. */
export function createSessionRepository(db: Kysely<DatabaseSchema>): SessionStore {
  async function completeTurn(sessionId: string, records: NewConversationRecord[], progress: SessionProgress, fence?: LeaseFence): Promise<boolean> {
    // One statement of fixed text: the rows, the transition log and the progress commit together, in one round trip.
    const parameters = [
      sessionId,
      transitionLogJson(progress),
      progress.transitions,
      ...recordColumns(records),
      snapshotText(progress),
      progress.currentState,
      progress.historyHash,
      ...(fence ? [fence.holder, fence.generation] : []),
    ];
    const result = await db.executeQuery(CompiledQuery.raw(fence ? COMPLETE_TURN_FENCED : COMPLETE_TURN, parameters));
    return Number(result.numAffectedRows ?? 0) > 0;
  }

  return {
    async get(sessionId: string): Promise<SessionRecord | undefined> {
      const row = await db.selectFrom('sessions').selectAll().where('session_id', '=', sessionId).executeTakeFirst();
      return row && toRecord(row);
    },

    async claim(sessionId: string, userId: string): Promise<SessionRecord & { created: boolean }> {
      const inserted = await db
        .insertInto('sessions')
        .values({ session_id: sessionId, user_id: userId })
        .onConflict((conflict) => conflict.column('session_id').doNothing())
        .returningAll()
        .executeTakeFirst();
      if (inserted) return { ...toRecord(inserted), created: true };
      // A separate statement: under READ COMMITTED it sees the row a concurrent claim committed.
      const existing = await db.selectFrom('sessions').selectAll().where('session_id', '=', sessionId).executeTakeFirst();
      if (!existing) throw new Error(`Session ${sessionId} neither inserted nor found while claiming it.`);
      return { ...toRecord(existing), created: false };
    },

    async findByHistoryHash(userId: string, historyHash: string): Promise<SessionRecord | undefined> {
      const row = await db
        .selectFrom('sessions')
        .selectAll()
        .where('user_id', '=', userId)
        .where('history_hash', '=', historyHash)
        .where('deleted_at', 'is', null)
        .orderBy('last_active', 'desc')
        .limit(1)
        .executeTakeFirst();
      return row && toRecord(row);
    },

    async saveProgress(sessionId: string, progress: SessionProgress): Promise<void> {
      // A deleted session keeps its cleared snapshot: the write is dropped, not failed, since
      // the runtime retries failed writes until they succeed.
      await completeTurn(sessionId, [], progress);
    },

    completeTurn,

    async list(options: { userId?: string; limit: number; after?: SessionCursor }): Promise<SessionPage> {
      const count = rowLimit(options.limit);
      if (count === 0) return { sessions: [], next: null };
      // Deleted sessions are gone for listing; `get` still returns them.
      let query = db
        .selectFrom('sessions')
        .selectAll()
        // Exact to the microsecond, which a JavaScript Date is not.
        .select(sql<string>`(extract(epoch from last_active) * 1000000)::bigint::text`.as('last_active_micros'))
        .where('deleted_at', 'is', null);
      if (options.userId !== undefined) query = query.where('user_id', '=', options.userId);
      const after = options.after;
      if (after !== undefined) {
        const lastActive = sql<Date>`timestamptz 'epoch' + ${after.lastActiveMicros}::bigint * interval '1 microsecond'`;
        query = query.where(({ eb, refTuple, tuple }) => eb(refTuple('last_active', 'session_id'), '<', tuple(lastActive, after.sessionId)));
      }
      const rows = await query.orderBy('last_active', 'desc').orderBy('session_id', 'desc').limit(count + 1).execute();
      const page = rows.slice(0, count);
      const last = page.at(-1);
      return {
        sessions: page.map(toRecord),
        next: rows.length > count && last ? { lastActiveMicros: last.last_active_micros, sessionId: last.session_id } : null,
      };
    },

    async markDeleted(sessionId: string): Promise<void> {
      await db
        .updateTable('sessions')
        .set({ deleted_at: sql<Date>`coalesce(deleted_at, now())`, snapshot: null })
        .where('session_id', '=', sessionId)
        .execute();
    },

    async listTransitions(sessionId: string, options: { afterId?: number; limit: number }): Promise<StoredTransition[]> {
      const count = rowLimit(options.limit);
      if (count === 0) return [];
      let query = db.selectFrom('session_transitions').selectAll().where('session_id', '=', sessionId);
      if (options.afterId !== undefined) query = query.where('id', '>', options.afterId);
      const rows = await query.orderBy('id', 'asc').limit(count).execute();
      return rows.map(toTransition);
    },

    async deleteTransitions(sessionId: string): Promise<number> {
      const result = await db.deleteFrom('session_transitions').where('session_id', '=', sessionId).executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}

function toRecord(row: Selectable<SessionsTable>): SessionRecord {
  return {
    sessionId: row.session_id,
    userId: row.user_id,
    createdAt: row.created_at,
    lastActive: row.last_active,
    historyHash: row.history_hash,
    snapshot: row.snapshot,
    currentState: row.current_state,
    transitions: row.transitions,
    deletedAt: row.deleted_at,
  };
}

function toTransition(row: Selectable<SessionTransitionsTable>): StoredTransition {
  return { id: Number(row.id), at: row.at, from: row.from_state, to: row.to_state, reason: row.reason };
}
