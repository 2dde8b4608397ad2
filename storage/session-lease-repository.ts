import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { LeaseGrant, SessionLeaseStore } from '../runtime/ports.js';
import type { DatabaseSchema } from './database-schema.js';

/** The session_leases table behind the runtime's SessionLeaseStore port. */
export function createSessionLeaseRepository(db: Kysely<DatabaseSchema>): SessionLeaseStore {
  return {
    async tryAcquire(sessionId: string, holder: string, ttlMs: number): Promise<LeaseGrant | undefined> {
      // The conflict update runs on the newest row version, so of racing processes at most one
      // gets a row back, and the generation it gets is exactly one above the previous holder's.
      const { rows } = await sql<{ generation: string | number }>`
        insert into session_leases as lease (session_id, holder, generation, expires_at)
        values (${sessionId}, ${holder}, 1, now() + ${ttlMs} * interval '1 millisecond')
        on conflict (session_id) do update
          set holder = excluded.holder, generation = lease.generation + 1, expires_at = excluded.expires_at
          where lease.expires_at <= now() or lease.holder = excluded.holder
        returning generation`.execute(db);
      const row = rows[0];
      return row ? { generation: Number(row.generation) } : undefined;
    },

    async renew(holder: string, sessionIds: string[], ttlMs: number): Promise<string[]> {
      if (sessionIds.length === 0) return [];
      const rows = await db
        .updateTable('session_leases')
        .set({ expires_at: sql<Date>`now() + ${ttlMs} * interval '1 millisecond'` })
        .where('holder', '=', holder)
        .where('session_id', 'in', sessionIds)
        // A lease given back (or lapsed) is not taken again by a renewal.
        .where('expires_at', '>', sql<Date>`now()`)
        .returning('session_id')
        .execute();
      return rows.map((row) => row.session_id);
    },

    async release(sessionId: string, holder: string, generation: number): Promise<void> {
      await db
        .updateTable('session_leases')
        .set({ expires_at: sql<Date>`now()` })
        .where('session_id', '=', sessionId)
        .where('holder', '=', holder)
        .where('generation', '=', generation)
        .execute();
    },
  };
}
