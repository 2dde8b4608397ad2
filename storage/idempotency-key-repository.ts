import { sql, type Kysely } from 'kysely';
import type { IdempotencyKeyClaim, IdempotencyKeyRecord, IdempotencyKeyStore, RecordedAnswer } from '../runtime/ports.js';
import { databaseCalls } from './database-calls.js';
import type { DatabaseSchema, IdempotencyKeysTable } from './database-schema.js';

type KeyRow = Pick<IdempotencyKeysTable, 'request_hash' | 'state' | 'holder' | 'status' | 'headers' | 'body'>;

/** The idempotency_keys table behind the runtime's IdempotencyKeyStore port. */
export function createIdempotencyKeyRepository(db: Kysely<DatabaseSchema>): IdempotencyKeyStore {
  return databaseCalls<IdempotencyKeyStore>({
    async claim(claim: IdempotencyKeyClaim, holder: string, leaseMs: number, ttlMs: number): Promise<IdempotencyKeyRecord | undefined> {
      // The conflict update runs on the newest row version: of racing processes at most one
      // gets the row back. A key is taken over only when it expired, or when the same request
      // runs under it and its holder stopped renewing (its process died).
      const { rows } = await sql<KeyRow>`
        insert into idempotency_keys as kept (user_id, idempotency_key, request_hash, state, holder, lease_until, expires_at)
        values (${claim.userId}, ${claim.key}, ${claim.requestHash}, 'running', ${holder},
          now() + ${leaseMs} * interval '1 millisecond', now() + ${ttlMs} * interval '1 millisecond')
        on conflict (user_id, idempotency_key) do update
          set request_hash = excluded.request_hash, state = 'running', holder = excluded.holder, lease_until = excluded.lease_until,
            expires_at = excluded.expires_at, status = null, headers = null, body = null
          where kept.expires_at <= now()
            or (kept.state = 'running' and kept.lease_until <= now() and kept.request_hash = excluded.request_hash)
        returning request_hash, state, holder, status, headers, body`.execute(db);
      return rows[0] && recordOf(rows[0]);
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

    async finish(userId: string, key: string, holder: string, answer: RecordedAnswer): Promise<void> {
      await db
        .updateTable('idempotency_keys')
        .set({ state: 'done', status: answer.status, headers: JSON.stringify(answer.headers), body: answer.body })
        .where('user_id', '=', userId)
        .where('idempotency_key', '=', key)
        .where('holder', '=', holder)
        .where('state', '=', 'running')
        .execute();
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
