import { sql, type Kysely } from 'kysely';
import type { DailyTokens, TokensUsed, TokenUsageStore } from '../runtime/ports.js';
import { databaseCalls } from './database-calls.js';
import type { DatabaseSchema } from './database-schema.js';
import { GroupCommit } from './group-commit.js';

/** One read of a user's tokens: on `day`, and on every day from `since` on. */
type UsedRequest = { userId: string; day: string; since: string };

/**
 * The `user_token_usage` table behind the runtime's TokenUsageStore port. The adds of calls
 * that end together go to the database in one statement (group commit), summed by user and day
 * first, since one statement may not update a row twice; the reads of turns that check their
 * budgets together go as one statement too. Both statements take their rows as arrays, so each
 * has one text whatever the number of rows (one prepared statement).
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
      const rows = [...summed.values()];
      await sql`insert into user_token_usage (user_id, day, prompt_tokens, completion_tokens)
        select * from unnest(${rows.map((row) => row.userId)}::varchar[], ${rows.map((row) => row.day)}::date[],
          ${rows.map((row) => row.promptTokens)}::bigint[], ${rows.map((row) => row.completionTokens)}::bigint[])
        on conflict (user_id, day) do update set
          prompt_tokens = user_token_usage.prompt_tokens + excluded.prompt_tokens,
          completion_tokens = user_token_usage.completion_tokens + excluded.completion_tokens`.execute(db);
    }
    return batches.map(() => undefined);
  });
  const reads = new GroupCommit<UsedRequest, TokensUsed>(async (requests) => {
    const { rows } = await sql<{ day: string | number; since: string | number }>`
      select coalesce(sum(used.prompt_tokens + used.completion_tokens) filter (where used.day = asked.day), 0) as day,
             coalesce(sum(used.prompt_tokens + used.completion_tokens), 0) as since
      from unnest(${requests.map((request) => request.userId)}::varchar[], ${requests.map((request) => request.day)}::date[],
        ${requests.map((request) => request.since)}::date[]) with ordinality as asked(user_id, day, since, position)
      left join user_token_usage used on used.user_id = asked.user_id and used.day >= asked.since
      group by asked.position
      order by asked.position`.execute(db);
    return rows.map((row) => ({ day: Number(row.day), since: Number(row.since) }));
  });
  return databaseCalls<TokenUsageStore>({
    add(entries) {
      return entries.length === 0 ? Promise.resolve() : adds.run(entries);
    },

    used(userId, day, since) {
      return reads.run({ userId, day, since });
    },
  });
}
