import { sql, type Kysely } from 'kysely';
import type { TurnStepStore } from '../runtime/ports.js';
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
  });
}
