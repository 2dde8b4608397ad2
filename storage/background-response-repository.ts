import { sql, type Kysely } from 'kysely';
import type { BackgroundResponseStore, StoredResponseEvent } from '../runtime/ports.js';
import type { DatabaseSchema } from './database-schema.js';
import { toJsonText } from '../runtime/json-text.js';
import { databaseCalls } from './database-calls.js';
import { RESPONSE_BODY_DEFAULTS_JSON } from './stored-response-body.js';

/** Events as the column arrays `unnest` makes rows of again: (sequence, type, data). */
function eventRows(events: StoredResponseEvent[]) {
  const sequences = events.map((event) => event.sequence);
  const types = events.map((event) => event.type);
  const data = events.map((event) => event.data);
  return sql`unnest(${sequences}::int[], ${types}::varchar[], ${data}::text[])`;
}

/** Inserts a running response's events, each once; none when the response is gone (deleted while it ran). */
function appendEvents(id: string, events: StoredResponseEvent[]) {
  return sql`insert into response_events (response_id, sequence, type, data)
    select ${id}::varchar, * from ${eventRows(events)}
    where exists (select 1 from responses where id = ${id})
    on conflict do nothing`;
}

/**
 * The runs and events of background responses (a deleted response's run may still write: its
 * writes then store nothing) (tables `background_runs` and
 * `response_events`, beside `responses`). Times are the database's (`now()`), so processes on
 * hosts whose clocks differ agree on which runs lapsed. A call that fails while the database
 * cannot be reached fails with DATABASE_UNAVAILABLE (`databaseCalls`).
 */
export function createBackgroundResponseRepository(db: Kysely<DatabaseSchema>): BackgroundResponseStore {
  return databaseCalls<BackgroundResponseStore>({
    async start(record, events, runner, leaseMs, request) {
      await sql`with response as (
          insert into responses (id, user_id, session_id, previous_response_id, history_hash, status, body, input)
          values (${record.id}, ${record.userId}, ${record.sessionId}, ${record.previousResponseId}, ${record.historyHash},
            ${record.body.status}, ${record.body.json}, ${toJsonText(record.input)})
          returning id
        ), appended as (
          insert into response_events (response_id, sequence, type, data)
          select response.id, events.* from response, ${eventRows(events)} as events
        )
        insert into background_runs (response_id, runner, expires_at, request)
        select id, ${runner}::varchar, now() + ${leaseMs}::float8 * interval '1 millisecond', ${request}::text from response`.execute(db);
    },

    async record(id, events, body, shownThrough) {
      await sql`with appended as (${appendEvents(id, events)}), shown as (
          update background_runs set shown_through = ${shownThrough ?? null}::integer
          where response_id = ${id} and ${shownThrough ?? null}::integer is not null
        )
        update responses set status = coalesce(${body?.status ?? null}, status), body = coalesce(${body?.json ?? null}, body)
        where id = ${id}`.execute(db);
    },

    async finish(id, end, events) {
      await sql`with appended as (${appendEvents(id, events)}), ended as (
          delete from background_runs where response_id = ${id}
        )
        update responses set status = ${end.body.status}, body = ${end.body.json}, history_hash = ${end.historyHash}, session_id = ${end.sessionId}
        where id = ${id}`.execute(db);
    },

    async renew(runner, leaseMs) {
      const { rows } = await sql<{ response_id: string; cancel_requested: boolean }>`update background_runs
        set expires_at = now() + ${leaseMs}::float8 * interval '1 millisecond'
        where runner = ${runner}
        returning response_id, cancel_requested`.execute(db);
      return rows.map((row) => ({ id: row.response_id, cancelRequested: row.cancel_requested }));
    },

    async requestCancel(id) {
      const result = await db.updateTable('background_runs').set({ cancel_requested: true }).where('response_id', '=', id).executeTakeFirst();
      return result.numUpdatedRows > 0n;
    },

    async failAbandoned(message, maxAttempts, everyRun = false) {
      // The lapsed runs are taken (deleted) once: of two processes sweeping at once, one fails each response.
      const { rows } = await sql<{ id: string }>`with lapsed as (
          delete from background_runs
          where (${everyRun}::boolean or expires_at < now()) and (request is null or attempts >= ${maxAttempts}::integer)
          returning response_id
        ), failed as (
          update responses set status = 'failed',
            body = (body::jsonb || jsonb_build_object('status', 'failed', 'error', jsonb_build_object('code', 'server_error', 'message', ${message}::text)))::text
          where id in (select response_id from lapsed)
          returning id, ${RESPONSE_BODY_DEFAULTS_JSON}::jsonb || jsonb_build_object('id', id, 'status', status) || body::jsonb as body
        ), appended as (
          insert into response_events (response_id, sequence, type, data)
          select failed.id, coalesce(last.sequence, -1) + 1, 'response.failed',
            jsonb_build_object('type', 'response.failed', 'sequence_number', coalesce(last.sequence, -1) + 1, 'response', failed.body)::text
          from failed left join lateral (
            select max(sequence) as sequence from response_events where response_id = failed.id
          ) last on true
        )
        select id from failed`.execute(db);
      return rows.map((row) => row.id);
    },

    async takeOver(runner, leaseMs, maxAttempts, everyRun = false) {
      // Of processes taking over at once, the first update wins; the others find the lease renewed and skip the run.
      // A cancel asked before its process died stays asked: the taker's first renewal cancels the run.
      const { rows } = await sql<{ id: string; user_id: string; session_id: string; request: string; body: string; shown_through: number; attempts: number }>`
        with taken as (
          update background_runs
          set runner = ${runner}, expires_at = now() + ${leaseMs}::float8 * interval '1 millisecond', attempts = attempts + 1
          where (${everyRun}::boolean or expires_at < now()) and request is not null and attempts < ${maxAttempts}::integer
          returning response_id, request, shown_through, attempts
        )
        select responses.id, responses.user_id, responses.session_id, taken.request, responses.body, taken.shown_through, taken.attempts
        from taken join responses on responses.id = taken.response_id`.execute(db);
      return rows.map((row) => ({
        id: row.id,
        userId: row.user_id,
        sessionId: row.session_id,
        request: row.request,
        body: row.body,
        shownThrough: row.shown_through,
        attempts: row.attempts,
      }));
    },

    async rewind(id, through) {
      const { rows } = await sql<{ next: number | null }>`with dropped as (
          delete from response_events where response_id = ${id} and sequence > ${through}::integer returning sequence
        )
        select greatest((select max(sequence) from dropped), ${through}::integer) + 1 as next`.execute(db);
      const events = await db.selectFrom('response_events').select(['sequence', 'type', 'data']).where('response_id', '=', id).where('sequence', '<=', through).orderBy('sequence').execute();
      return { events, nextSequence: Number(rows[0]?.next ?? through + 1) };
    },

    async eventsAfter(id, sequence, limit) {
      return db
        .selectFrom('response_events')
        .select(['sequence', 'type', 'data'])
        .where('response_id', '=', id)
        .where('sequence', '>', sequence)
        .orderBy('sequence')
        .limit(limit)
        .execute();
    },

    async pruneEvents(ageMs) {
      const result = await sql`delete from response_events events
        where events.created_at < now() - ${ageMs}::float8 * interval '1 millisecond'
          and not exists (select 1 from background_runs runs where runs.response_id = events.response_id)`.execute(db);
      return Number(result.numAffectedRows ?? 0n);
    },
  });
}
