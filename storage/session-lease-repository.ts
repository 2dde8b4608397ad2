import { sql } from 'kysely';
import type { LeaseGrant, LeaseRenewal, SessionLeaseStore } from '../runtime/ports.js';
import type { Database } from './create-database.js';

/** The channel on which a process asks a lease's holder to give it back; the payload is `<holder> <session id>`. */
const HANDOVER_CHANNEL = 'svc_agent_session_handover';

/** The session_leases table behind the runtime's SessionLeaseStore port. */
export function createSessionLeaseRepository(database: Database): SessionLeaseStore {
  const { db } = database;
  return {
    async tryAcquire(sessionId: string, holder: string, ttlMs: number): Promise<LeaseGrant | undefined> {
      // The conflict update runs on the newest row version, so of racing processes at most one
      // gets a row back, and the generation it gets is exactly one above the previous holder's.
      const { rows } = await sql<{ generation: string | number }>`
        insert into session_leases as lease (session_id, holder, generation, expires_at)
        values (${sessionId}, ${holder}, 1, now() + ${ttlMs} * interval '1 millisecond')
        on conflict (session_id) do update
          set holder = excluded.holder, generation = lease.generation + 1, expires_at = excluded.expires_at, wanted = false
          where lease.expires_at <= now() or lease.holder = excluded.holder
        returning generation`.execute(db);
      const row = rows[0];
      return row ? { generation: Number(row.generation) } : undefined;
    },

    async askHandover(sessionId: string, asker: string): Promise<void> {
      // The notification is sent when the statement commits, with the holder the row names then.
      await sql`
        update session_leases set wanted = true
        where session_id = ${sessionId} and holder <> ${asker} and expires_at > now()
        returning pg_notify(${HANDOVER_CHANNEL}, holder || ' ' || session_id)`.execute(db);
    },

    async renew(holder: string, sessionIds: string[], ttlMs: number): Promise<LeaseRenewal> {
      if (sessionIds.length === 0) return { kept: [], wanted: [] };
      // The rows are locked in session order, as the end of turns share-locks them, so the two
      // never wait on each other's locks in opposite orders. The sessions are one array
      // parameter: a process may hold thousands, renewed every third of a lease.
      const { rows } = await sql<{ session_id: string; wanted: boolean }>`
        update session_leases set expires_at = now() + ${ttlMs} * interval '1 millisecond'
        where holder = ${holder} and expires_at > now() and session_id in (
          select session_id from session_leases
          where holder = ${holder} and session_id = any(${sessionIds}::varchar[])
            -- A lease given back (or lapsed) is not taken again by a renewal.
            and expires_at > now()
          order by session_id
          for no key update)
        returning session_id, wanted`.execute(db);
      return { kept: rows.map((row) => row.session_id), wanted: rows.filter((row) => row.wanted).map((row) => row.session_id) };
    },

    async release(sessionId: string, holder: string, generation: number): Promise<void> {
      // Expired since always, not since now(): a renewal whose transaction began before this
      // commits compares with its own, earlier now(), and would find a lease that expires
      // "now" still valid and extend it for a holder that has let it go (the next holder then
      // waited out the whole lease).
      await db
        .updateTable('session_leases')
        .set({ expires_at: sql<Date>`'-infinity'::timestamptz` })
        .where('session_id', '=', sessionId)
        .where('holder', '=', holder)
        .where('generation', '=', generation)
        .execute();
    },

    onHandoverAsked(holder: string, asked: (sessionId: string) => void): Promise<() => Promise<void>> {
      return database.listen(HANDOVER_CHANNEL, (payload) => {
        const space = payload.indexOf(' ');
        if (space > 0 && payload.slice(0, space) === holder) asked(payload.slice(space + 1));
      });
    },
  };
}
