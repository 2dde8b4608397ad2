import { sql } from 'kysely';
import type { ExpressionBuilder, Kysely, QueryCreator, Selectable } from 'kysely';
import type { LeaseFence, NewConversationRecord, SessionCursor, SessionPage, SessionProgress, SessionRecord, SessionStore, StoredTransition } from '../runtime/ports.js';
import { toConversationRow } from './conversation-repository.js';
import { toJsonText } from './json-text.js';
import type { DatabaseSchema, SessionsTable, SessionTransitionsTable } from './database-schema.js';
import { rowLimit } from './row-limit.js';

function progressValues(progress: SessionProgress) {
  return {
    snapshot: progress.snapshot === undefined || progress.snapshot === null ? null : toJsonText(progress.snapshot),
    current_state: progress.currentState,
    transitions: progress.transitions,
    history_hash: progress.historyHash,
    last_active: sql<Date>`now()`,
  };
}

/**
 * Inserts the progress's transition log (none: no rows) in its order, unless the session is
 * deleted or its stored transition count already reached the progress's (a retry of a write
 * that did commit). As a CTE it sees the session row as it was before the statement.
 */
function transitionLogInsert(creator: QueryCreator<DatabaseSchema>, sessionId: string, progress: SessionProgress) {
  const entries = (progress.transitionLog ?? []).map((entry) => ({ at: entry.at, from_state: entry.from, to_state: entry.to, reason: entry.reason }));
  // One parameter whatever the log's length, and an empty log is simply no rows.
  const log = sql<{ at: Date; from_state: string; to_state: string; reason: string | null; position: number }>`rows from (jsonb_to_recordset(${JSON.stringify(entries)}::jsonb) as (at timestamptz, from_state varchar, to_state varchar, reason text)) with ordinality`;
  return creator
    .insertInto('session_transitions')
    .columns(['session_id', 'at', 'from_state', 'to_state', 'reason'])
    .expression(
      creator
        .selectFrom(log.as<'log'>(sql`log(at, from_state, to_state, reason, position)`))
        .select((eb) => [eb.val(sessionId).as('session_id'), 'log.at', 'log.from_state', 'log.to_state', 'log.reason'])
        .where((eb) =>
          eb.exists(
            eb
              .selectFrom('sessions')
              .select('session_id')
              .where('session_id', '=', sessionId)
              .where('deleted_at', 'is', null)
              .where('transitions', '<', progress.transitions),
          ),
        )
        // Identity values follow the order the rows are inserted in.
        .orderBy('log.position'),
    );
}

/** One statement: the progress on the session row and its transition log. */
function progressUpdate(db: Kysely<DatabaseSchema>, sessionId: string, progress: SessionProgress) {
  return db
    .with('logged', (cte) => transitionLogInsert(cte, sessionId, progress))
    .updateTable('sessions')
    .set(progressValues(progress))
    .where('session_id', '=', sessionId)
    .where('deleted_at', 'is', null);
}

/**
 * True while `fence` is the session's lease. The row stays share-locked until the write
 * commits, so a process taking the lease meanwhile waits and then reads this turn's rows.
 */
function leaseStillHeld(sessionId: string, fence: LeaseFence) {
  return ({ exists, selectFrom }: ExpressionBuilder<DatabaseSchema, 'sessions'>) =>
    exists(
      selectFrom('session_leases')
        .select(sql<number>`1`.as('held'))
        .where('session_id', '=', sessionId)
        .where('holder', '=', fence.holder)
        .where('generation', '=', fence.generation)
        .forShare(),
    );
}

/** The sessions table behind the runtime's SessionStore port. */
export function createSessionRepository(db: Kysely<DatabaseSchema>): SessionStore {
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
      await progressUpdate(db, sessionId, progress).execute();
    },

    async completeTurn(sessionId: string, records: NewConversationRecord[], progress: SessionProgress, fence?: LeaseFence): Promise<boolean> {
      // One statement: the rows, the transition log and the progress commit together, in one round trip.
      let update =
        records.length === 0
          ? progressUpdate(db, sessionId, progress)
          : db
              .with('logged', (cte) => transitionLogInsert(cte, sessionId, progress))
              .with('stored', (cte) => cte.insertInto('conversations').values(records.map(toConversationRow)).returning('id'))
              .updateTable('sessions')
              .set(progressValues(progress))
              .where('session_id', '=', sessionId)
              .where('deleted_at', 'is', null);
      if (fence) update = update.where(leaseStillHeld(sessionId, fence));
      const result = await update.executeTakeFirst();
      return Number(result.numUpdatedRows) > 0;
    },

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
