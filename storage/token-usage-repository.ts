import { sql, type Kysely } from 'kysely';
import type { DailyTokens, TokenUsageStore } from '../runtime/ports.js';
import { databaseCalls } from './database-calls.js';
import type { DatabaseSchema } from './database-schema.js';
import { GroupCommit } from './group-commit.js';

/**
 * The `user_token_usage` table behind the runtime's TokenUsageStore port. The adds of calls
 * that end together go to the database in one statement (group commit), summed by user and day
 * first: one statement may not update a row twice.
 */
export function createTokenUsageRepository(db: Kysely<DatabaseSchema>): TokenUsageStore {
  const adds = new GroupCommit<DailyTokens[], void>(async (batches) => {
    const summed = new Map<string, DailyTokens>();
    for (const entry of batches.flat()) {
      const key = `${entry.day} ${entry.userId}`;
      const sum = summed.get(key);
      if (sum) {
        sum.promptTokens += entry.promptTokens;
        sum.completionTokens += entry.completionTokens;
      } else summed.set(key, { ...entry });
    }
    if (summed.size > 0) {
      const rows = [...summed.values()].map((entry) => ({ user_id: entry.userId, day: entry.day, prompt_tokens: entry.promptTokens, completion_tokens: entry.completionTokens }));
      await db
        .insertInto('user_token_usage')
        .values(rows)
        .onConflict((conflict) =>
          conflict.columns(['user_id', 'day']).doUpdateSet({
            prompt_tokens: sql`user_token_usage.prompt_tokens + excluded.prompt_tokens`,
            completion_tokens: sql`user_token_usage.completion_tokens + excluded.completion_tokens`,
          }),
        )
        .execute();
    }
    return batches.map(() => undefined);
  });
  return databaseCalls<TokenUsageStore>({
    add(entries) {
      return entries.length === 0 ? Promise.resolve() : adds.run(entries);
    },

    async used(userId, day, since) {
      const { rows } = await sql<{ day: string | number; since: string | number }>`
        select coalesce(sum(prompt_tokens + completion_tokens) filter (where day = ${day}::date), 0) as day,
               coalesce(sum(prompt_tokens + completion_tokens), 0) as since
        from user_token_usage where user_id = ${userId} and day >= ${since}::date`.execute(db);
      const row = rows[0];
      return { day: Number(row?.day ?? 0), since: Number(row?.since ?? 0) };
    },
  });
}
