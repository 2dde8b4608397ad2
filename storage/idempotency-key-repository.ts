import { sql, type Kysely } from 'kysely';
import type { IdempotencyKeyClaim, IdempotencyKeyRecord, IdempotencyKeyStore, RecordedAnswer } from '../runtime/ports.js';
import { databaseCalls } from './database-calls.js';
import { GroupCommit } from './group-commit.js';
import type { DatabaseSchema, IdempotencyKeysTable } from './database-schema.js';

type KeyRow = Pick<IdempotencyKeysTable, 'request_hash' | 'state' | 'holder' | 'status' | 'headers' | 'body'>;

/** A claimed row, and whether the claim took it over (an update) rather than inserting it. */
type ClaimedRow = KeyRow & Pick<IdempotencyKeysTable, 'user_id' | 'idempotency_key'> & { updated: boolean };

/** One claim of a group commit: the key, its holder and their times. */
type ClaimRequest = { claim: IdempotencyKeyClaim; holder: string; leaseMs: number; ttlMs: number };

/** One recorded answer of a group commit. */
type FinishRequest = { userId: string; key: string; holder: string; answer: RecordedAnswer };

const keyOf = (userId: string, key: string) => `${userId}\u0000${key}`;

/** The idempotency_keys table behind the runtime's IdempotencyKeyStore port. */
export function createIdempotencyKeyRepository(db: Kysely<DatabaseSchema>): IdempotencyKeyStore {
  // The claims and answers of concurrent requests commit together (group commit), at most one
  // of a key a statement (a statement's conflict clause may not touch a row twice).
  const claims = new GroupCommit<ClaimRequest, IdempotencyKeyRecord | undefined>(
    async (requests) => {
      const values = requests.map(
        ({ claim, holder, leaseMs, ttlMs }) =>
          sql`(${claim.userId}, ${claim.key}, ${claim.requestHash}, 'running', ${holder}, now() + ${leaseMs} * interval '1 millisecond', now() + ${ttlMs} * interval '1 millisecond')`,
      );
      // The conflict update runs on the newest row version: of racing processes at most one
      // gets the row back. A key is taken over only when it expired, or when the same request
      // runs under it and its holder stopped renewing (its process died).
      const { rows } = await sql<ClaimedRow>`
        insert into idempotency_keys as kept (user_id, idempotency_key, request_hash, state, holder, lease_until, expires_at)
        values ${sql.join(values)}
        on conflict (user_id, idempotency_key) do update
          set request_hash = excluded.request_hash, state = 'running', holder = excluded.holder, lease_until = excluded.lease_until,
            expires_at = excluded.expires_at, status = null, headers = null, body = null
          where kept.expires_at <= now()
            or (kept.state = 'running' and kept.lease_until <= now() and kept.request_hash = excluded.request_hash)
        returning user_id, idempotency_key, request_hash, state, holder, status, headers, body, (xmax::text <> '0') as updated`.execute(db);
      // xmax is 0 on a row this statement inserted, and set on one its conflict clause updated.
      const claimed = new Map(rows.map((row) => [keyOf(row.user_id, row.idempotency_key), { ...recordOf(row), takenOver: row.updated === true }]));
      return requests.map(({ claim }) => claimed.get(keyOf(claim.userId, claim.key)));
    },
    ({ claim }) => keyOf(claim.userId, claim.key),
  );
  const finishes = new GroupCommit<FinishRequest, void>(
    async (requests) => {
      const values = requests.map(
        ({ userId, key, holder, answer }) => sql`(${userId}, ${key}, ${holder}, ${answer.status}::integer, ${JSON.stringify(answer.headers)}, ${answer.body})`,
      );
      await sql`
        update idempotency_keys as kept
        set state = 'done', status = answer.status, headers = answer.headers, body = answer.body
        from (values ${sql.join(values)}) as answer (user_id, idempotency_key, holder, status, headers, body)
        where kept.user_id = answer.user_id and kept.idempotency_key = answer.idempotency_key
          and kept.holder = answer.holder and kept.state = 'running'`.execute(db);
      return requests.map(() => undefined);
    },
    ({ userId, key }) => keyOf(userId, key),
  );
  return databaseCalls<IdempotencyKeyStore>({
    claim(claim: IdempotencyKeyClaim, holder: string, leaseMs: number, ttlMs: number): Promise<IdempotencyKeyRecord | undefined> {
      return claims.run({ claim, holder, leaseMs, ttlMs });
    },

    async get(userId: string, key: string): Promise<IdempotencyKeyRecord | undefined> {
      const row = await db
        .selectFrom('idempotency_keys')
        .select(['request_hash', 'state', 'holder', 'status', 'headers', 'body'])
        .where('user_id', '=', userId)
        .where('idempotency_key', '=', key)
        .where('expires_at', '>', sql<Date>`now()`)
        .executeTakeFirst();
      return row && recordOf(row);
    },

    async renew(userId: string, key: string, holder: string, leaseMs: number): Promise<boolean> {
      const result = await db
        .updateTable('idempotency_keys')
        .set({ lease_until: sql<Date>`now() + ${leaseMs} * interval '1 millisecond'` })
        .where('user_id', '=', userId)
        .where('idempotency_key', '=', key)
        .where('holder', '=', holder)
        .where('state', '=', 'running')
        .executeTakeFirst();
      return result.numUpdatedRows > 0n;
    },

    finish(userId: string, key: string, holder: string, answer: RecordedAnswer): Promise<void> {
      return finishes.run({ userId, key, holder, answer });
    },

    async release(userId: string, key: string, holder: string): Promise<void> {
      await db
        .deleteFrom('idempotency_keys')
        .where('user_id', '=', userId)
        .where('idempotency_key', '=', key)
        .where('holder', '=', holder)
        .where('state', '=', 'running')
        .execute();
    },

    async deleteExpired(): Promise<number> {
      const result = await db.deleteFrom('idempotency_keys').where('expires_at', '<=', sql<Date>`now()`).executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  });
}

function recordOf(row: KeyRow): IdempotencyKeyRecord {
  const answer = row.state === 'done' && row.status !== null ? { status: row.status, headers: JSON.parse(row.headers ?? '{}') as Record<string, string>, body: row.body ?? '' } : null;
  return { requestHash: row.request_hash, state: row.state, holder: row.holder, answer };
}
