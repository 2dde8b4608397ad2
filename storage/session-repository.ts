import { CompiledQuery, sql } from 'kysely';
import type { Kysely, Selectable } from 'kysely';
import { FIRST_LEASE_GENERATION } from '../runtime/ports.js';
import type { LeaseFence, NewConversationRecord, NewResponseRecord, NewSession, SessionCursor, SessionStart, SessionMetadata, SessionPage, SessionProgress, SessionRecord, SessionStore, SessionUsage, StoredTransition } from '../runtime/ports.js';
import { insertRecordColumns, recordColumns } from './conversation-repository.js';
import { GroupCommit } from './group-commit.js';
import { hotStatement } from './prepared-statements.js';
import { toJsonText } from '../runtime/json-text.js';
import type { DatabaseSchema, SessionsTable, SessionTransitionsTable } from './database-schema.js';
import { rowLimit } from './row-limit.js';
import { binaryTextArray } from './binary-text-array.js';
import { databaseCalls } from './database-calls.js';

/** A snapshot as stored: JSON text with lone surrogates replaced, or null. */
function snapshotText(progress: SessionProgress): string | null {
  return progress.snapshot === undefined || progress.snapshot === null ? null : toJsonText(progress.snapshot);
}

/**
 * The ends of concurrent turns, one per session, in one statement of fixed text (never
 * rebuilt, one round trip, one commit), the turns given as column arrays. As CTEs see the
 * session rows as they were before the statement: the leases the fenced turns ran under,
 * share-locked in session order until commit, so a process taking one meanwhile waits and
 * then reads that turn's rows (and two statements never wait on each other's locks in
 * opposite orders); each turn's transition log in its order, unless its session is deleted
 * or its stored transition count already reached the turn's (a retry of a write that did
 * commit); the turns' rows in order; then each turn's progress on its session row unless
 * the session is deleted or, for a fenced turn, its lease moved on. The rows are stored
 * either way (their client had the answer). Returns the sessions whose progress was stored.
 */
const COMPLETE_TURNS = hotStatement(`with turn as (
    select * from unnest($1::varchar[], $2::integer[], $3::text[], $4::varchar[], $5::text[], $6::varchar[], $7::bigint[], $13::text[])
      as turn(session_id, transitions, snapshot, current_state, history_hash, holder, generation, usage)
  ), fenced as (
    select lease.session_id from session_leases lease join turn on turn.session_id = lease.session_id
    where lease.holder = turn.holder and lease.generation = turn.generation
    order by lease.session_id
    for share of lease
  ), logged as (
    insert into session_transitions (session_id, at, from_state, to_state, reason)
    select log.session_id, log.at, log.from_state, log.to_state, log.reason
    from rows from (jsonb_to_recordset($8::jsonb) as (session_id varchar, at timestamptz, from_state varchar, to_state varchar, reason text))
      with ordinality as log(session_id, at, from_state, to_state, reason, position)
    join turn on turn.session_id = log.session_id
    join sessions on sessions.session_id = log.session_id
    where sessions.deleted_at is null and sessions.transitions < turn.transitions
    order by log.position
  ), stored as (
    ${insertRecordColumns(9)}
  ), kept as (
    insert into responses (id, user_id, session_id, previous_response_id, history_hash, status, body, input)
    select * from unnest($14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::text[], $20::text[], $21::text[])
    on conflict (id) do nothing
  )
  update sessions set snapshot = turn.snapshot::jsonb, current_state = turn.current_state, transitions = turn.transitions,
    history_hash = turn.history_hash, last_active = now(), usage = coalesce(turn.usage::jsonb, sessions.usage)
  from turn
  where sessions.session_id = turn.session_id and sessions.deleted_at is null
    and (turn.holder is null or turn.session_id in (select session_id from fenced))
  returning sessions.session_id`);

/**
 * A new session's row and its first conversation records (given as `recordColumns` from $5 on)
 * in one statement, so one transaction: both or neither. Returns the session row.
 */
const CREATE_SESSION = `with session as (
    insert into sessions (session_id, user_id, metadata, history_hash) values ($1, $2, $3::jsonb, $4)
    returning *
  ), stored as (
    ${insertRecordColumns(5)}
  )
  select * from session`;

/**
 * The starts of concurrent turns' new sessions (`SessionStore.start`), one per session, in one
 * statement of fixed text: the sessions' rows, their leases (for those given a holder: the
 * first generation, expiring the given milliseconds after now) and their first records in
 * order, from column arrays. No row of these sessions exists: nothing is read first.
 */
const START_SESSIONS = hotStatement(`with session as (
    insert into sessions (session_id, user_id) select * from unnest($1::varchar[], $2::varchar[])
  ), lease as (
    insert into session_leases (session_id, holder, generation, expires_at)
    select lease.session_id, lease.holder, ${FIRST_LEASE_GENERATION}, now() + lease.ttl_ms * interval '1 millisecond'
    from unnest($1::varchar[], $3::varchar[], $4::integer[]) as lease(session_id, holder, ttl_ms)
    where lease.holder is not null
  )
  ${insertRecordColumns(5)}`);

/** The parameters of `START_SESSIONS` for starts of distinct sessions. */
function startParameters(starts: SessionStart[]): unknown[] {
  return [
    starts.map((start) => start.sessionId),
    starts.map((start) => start.userId),
    starts.map((start) => start.lease?.holder ?? null),
    starts.map((start) => start.lease?.ttlMs ?? null),
    ...recordColumns(starts.flatMap((start) => start.records)),
  ];
}

/** The end of one turn, as `completeTurn` is given it. */
type TurnEnd = { sessionId: string; records: NewConversationRecord[]; progress: SessionProgress; fence?: LeaseFence; response?: NewResponseRecord };

/** The parameters of `COMPLETE_TURNS` for turn ends of distinct sessions. */
function turnEndParameters(ends: TurnEnd[]): unknown[] {
  const log = ends.flatMap(({ sessionId, progress }) =>
    (progress.transitionLog ?? []).map((entry) => ({ session_id: sessionId, at: entry.at, from_state: entry.from, to_state: entry.to, reason: entry.reason })),
  );
  return [
    ends.map((end) => end.sessionId),
    ends.map((end) => end.progress.transitions),
    ends.map((end) => snapshotText(end.progress)),
    ends.map((end) => end.progress.currentState),
    ends.map((end) => end.progress.historyHash),
    ends.map((end) => end.fence?.holder ?? null),
    ends.map((end) => end.fence?.generation ?? null),
    JSON.stringify(log),
    ...recordColumns(ends.flatMap((end) => end.records)),
    ends.map((end) => (end.progress.usage ? toJsonText(end.progress.usage) : null)),
    ...responseColumns(ends.flatMap(({ response }) => (response ? [response] : []))),
  ];
}

/**
 * Responses as the columns of their rows, each a `text[]` in binary form: the database copies
 * the body's JSON text (the client's, serialised once) and the input's as they are, where a
 * JSON parameter had it parse every byte.
 */
function responseColumns(responses: NewResponseRecord[]): Buffer[] {
  return [
    binaryTextArray(responses.map((response) => response.id)),
    binaryTextArray(responses.map((response) => response.userId)),
    binaryTextArray(responses.map((response) => response.sessionId)),
    binaryTextArray(responses.map((response) => response.previousResponseId)),
    binaryTextArray(responses.map((response) => response.historyHash)),
    binaryTextArray(responses.map((response) => response.body.status)),
    binaryTextArray(responses.map((response) => response.body.json)),
    binaryTextArray(responses.map((response) => toJsonText(response.input))),
  ];
}

/** The sessions table behind the runtime's SessionStore port. */
/** What the session repository tells its database about. */
export type SessionRepositoryOptions = {
  /**
   * `count` sessions were created, each a row of `sessions` and, on a server, of `session_leases`
   * (with it, or taken by its first turn): what keeps those tables' statistics fresh.
   */
  onNewSessions?: (count: number) => void;
};

export function createSessionRepository(db: Kysely<DatabaseSchema>, options: SessionRepositoryOptions = {}): SessionStore {
  // The ends of concurrent turns commit together (group commit), a session's one after the other.
  const turnEnds = new GroupCommit<TurnEnd, boolean>(
    async (ends) => {
      const { rows } = await db.executeQuery<{ session_id: string }>(CompiledQuery.raw(COMPLETE_TURNS, turnEndParameters(ends)));
      const updated = new Set(rows.map((row) => row.session_id));
      return ends.map((end) => updated.has(end.sessionId));
    },
    (end) => end.sessionId,
  );

  // New sessions' first writes commit together too.
  const starts = new GroupCommit<SessionStart, void>(async (batch) => {
    await db.executeQuery(CompiledQuery.raw(START_SESSIONS, startParameters(batch)));
    options.onNewSessions?.(batch.length);
    return batch.map(() => undefined);
  });

  function completeTurn(sessionId: string, records: NewConversationRecord[], progress: SessionProgress, fence?: LeaseFence, response?: NewResponseRecord): Promise<boolean> {
    return turnEnds.run({ sessionId, records, progress, fence, response });
  }

  return databaseCalls<SessionStore>({
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
      if (inserted) {
        options.onNewSessions?.(1);
        return { ...toRecord(inserted), created: true };
      }
      // A separate statement: under READ COMMITTED it sees the row a concurrent claim committed.
      const existing = await db.selectFrom('sessions').selectAll().where('session_id', '=', sessionId).executeTakeFirst();
      if (!existing) throw new Error(`Session ${sessionId} neither inserted nor found while claiming it.`);
      return { ...toRecord(existing), created: false };
    },

    async create(session: NewSession): Promise<SessionRecord> {
      const records = session.records.map((record) => ({ ...record, userId: session.userId, sessionId: session.sessionId }));
      const parameters = [session.sessionId, session.userId, toJsonText(session.metadata), session.historyHash, ...recordColumns(records)];
      const { rows } = await db.executeQuery<Selectable<SessionsTable>>(CompiledQuery.raw(CREATE_SESSION, parameters));
      options.onNewSessions?.(1);
      return toRecord(rows[0]!);
    },

    start(start: SessionStart): Promise<void> {
      return starts.run(start);
    },

    async updateMetadata(sessionId: string, userId: string, metadata: SessionMetadata): Promise<SessionRecord | undefined> {
      const row = await db
        .updateTable('sessions')
        .set({ metadata: toJsonText(metadata) })
        .where('session_id', '=', sessionId)
        .where('user_id', '=', userId)
        .where('deleted_at', 'is', null)
        .returningAll()
        .executeTakeFirst();
      return row && toRecord(row);
    },

    async unansweredFirstTurns(userId: string, emptyHash: string, withinMs: number, limit: number): Promise<string[]> {
      const rows = await db
        .selectFrom('sessions')
        .select('session_id')
        .where('user_id', '=', userId)
        .where((where) => where.or([where('history_hash', 'is', null), where('history_hash', '=', emptyHash)]))
        .where('deleted_at', 'is', null)
        .where('last_active', '>', sql<Date>`now() - ${withinMs} * interval '1 millisecond'`)
        .orderBy('last_active', 'desc')
        .limit(limit)
        .execute();
      return rows.map((row) => row.session_id);
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

    async usageOf(userId: string): Promise<{ sessions: number; usage: SessionUsage }> {
      const { rows } = await sql<{ sessions: string | number; usage: SessionUsage | null }>`
        select count(*) as sessions,
          (select jsonb_object_agg(model, jsonb_build_object('prompt_tokens', prompt, 'completion_tokens', completion))
           from (select entry.key as model, sum((entry.value->>'prompt_tokens')::bigint) as prompt, sum((entry.value->>'completion_tokens')::bigint) as completion
                 from sessions, jsonb_each(sessions.usage) as entry where sessions.user_id = ${userId} group by entry.key) as by_model) as usage
        from sessions where user_id = ${userId}`.execute(db);
      return { sessions: Number(rows[0]?.sessions ?? 0), usage: rows[0]?.usage ?? {} };
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
  });
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
    metadata: row.metadata ?? {},
    usage: row.usage ?? {},
  };
}

function toTransition(row: Selectable<SessionTransitionsTable>): StoredTransition {
  return { id: Number(row.id), at: row.at, from: row.from_state, to: row.to_state, reason: row.reason };
}
