import { sql, type Kysely } from 'kysely';
import { TURN_SETTINGS_STEP, type TurnStepStore } from '../runtime/ports.js';
import { databaseCalls } from './database-calls.js';
import type { DatabaseSchema } from './database-schema.js';
import { GroupCommit } from './group-commit.js';

/** One step of a group commit. */
type StepRequest = { sessionId: string; anchor: string; step: string; body: string };

/**
 * The `turn_steps` table behind the runtime's TurnStepStore port. The steps that turns of
 * several sessions complete together are stored in one statement (group commit), each with
 * the deletion of its session's steps of other turns.
 */
export function createTurnStepRepository(db: Kysely<DatabaseSchema>): TurnStepStore {
  const steps = new GroupCommit<StepRequest, void>(async (requests) => {
    const values = requests.map(({ sessionId, anchor, step, body }) => sql`(${sessionId}::varchar, ${anchor}::varchar, ${step}::varchar, ${body}::text)`);
    await sql`with step (session_id, anchor, step, body) as (values ${sql.join(values)}),
        dropped as (
          delete from turn_steps stored using step
          where stored.session_id = step.session_id and stored.anchor <> step.anchor
        )
      insert into turn_steps (session_id, anchor, step, body)
      select session_id, anchor, step, body from step
      on conflict do nothing`.execute(db);
    return requests.map(() => undefined);
  });
  return databaseCalls<TurnStepStore>({
    record(sessionId, anchor, step, body) {
      return steps.run({ sessionId, anchor, step, body });
    },

    async load(sessionId, anchor) {
      const rows = await db.selectFrom('turn_steps').select(['step', 'body']).where('session_id', '=', sessionId).where('anchor', '=', anchor).execute();
      return new Map(rows.map((row) => [row.step, row.body]));
    },

    async clear(sessionId) {
      await db.deleteFrom('turn_steps').where('session_id', '=', sessionId).execute();
    },

    async abandoned(quietMs, leases, limit) {
      const since = sql`now() - ${quietMs} * interval '1 millisecond'`;
      const quiet = leases
        ? sql`not exists (select 1 from session_leases lease where lease.session_id = step.session_id and lease.expires_at > ${since})`
        : sql`not exists (select 1 from turn_steps newer where newer.session_id = step.session_id and newer.created_at > ${since})`;
      const { rows } = await sql<{ session_id: string; user_id: string }>`
        select step.session_id, session.user_id from turn_steps step
        join sessions session on session.session_id = step.session_id
        where step.step = ${TURN_SETTINGS_STEP} and session.deleted_at is null
          and coalesce(session.snapshot ->> 'unanswered', 'false') <> 'true'
          and ${quiet}
        order by step.created_at
        limit ${limit}`.execute(db);
      return rows.map((row) => ({ sessionId: row.session_id, userId: row.user_id }));
    },
  });
}
