import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sql } from 'kysely';
import { DurableWriter } from '../../runtime/sessions/durable-writer.js';
import { EventBus } from '../../runtime/observability/event-bus.js';
import { FIRST_LEASE_GENERATION, type SessionLeaseStore } from '../../runtime/ports.js';
import { SessionLeases } from '../../runtime/sessions/session-leases.js';
import { createSessionRepository, migrateToLatest } from '../../storage/index.js';
import { createSessionLeaseRepository } from '../../storage/session-lease-repository.js';
import { databaseTargets, type TestDatabase } from '../support/databases.js';

const LEASE_MS = 150;

for (const target of databaseTargets().filter((each) => each.backend !== 'pglite-socket')) {
  describe(`SessionLeases on ${target.name}`, () => {
    let database: TestDatabase;
    let store: SessionLeaseStore;

    before(async () => {
      database = await target.open({ vector: false });
      await migrateToLatest(database, { vector: false, embeddingDimensions: 3 });
      store = createSessionLeaseRepository(database);
    });
    after(async () => {
      await database?.close();
    });

    it('does not call a lease lost when a renewal reads it just after this process gave it back', async () => {
      let releaseCommitted!: () => void;
      const committed = new Promise<void>((resolve) => (releaseCommitted = resolve));
      let openGate!: () => void;
      const gate = new Promise<void>((resolve) => (openGate = resolve));
      const renewals: string[][] = [];
      // The real store; its release answers only once the test lets it, after the statement committed.
      const slowAnswer: SessionLeaseStore = {
        ...store,
        renew: async (...args) => {
          const renewal = await store.renew(...args);
          renewals.push(renewal.kept);
          return renewal;
        },
        release: async (...args) => {
          await store.release(...args);
          releaseCommitted();
          await gate;
        },
      };
      const lost: string[] = [];
      const leases = new SessionLeases({
        store: slowAnswer,
        writer: new DurableWriter(new EventBus()),
        settings: { leaseMs: LEASE_MS },
        onLost: (sessionId) => lost.push(sessionId),
      });
      try {
        const sessionId = randomUUID();
        await leases.acquire(sessionId, 1000);
        leases.release(sessionId);
        leases.giveBack(sessionId);
        await committed;
        // A renewal (every third of the lease) runs while the release's answer is on its way.
        const renewalsBefore = renewals.length;
        for (let waited = 0; renewals.length < renewalsBefore + 1 && waited < 2000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
        expect(renewals.length).to.be.at.least(renewalsBefore + 1);
        expect(lost).to.deep.equal([]);
        openGate();
        await leases.acquire(sessionId, 1000);
        expect(leases.heldCount).to.equal(1);
      } finally {
        openGate();
        await leases.close();
      }
    });

    it("renews, reuses and gives back the lease a new session's start took once it is adopted", async () => {
      const lost: string[] = [];
      const leases = new SessionLeases({ store, writer: new DurableWriter(new EventBus()), settings: { leaseMs: LEASE_MS }, onLost: (sessionId) => lost.push(sessionId) });
      try {
        const sessionId = randomUUID();
        const sentAt = Date.now();
        await createSessionRepository(database.db).start({ sessionId, userId: 'user-a', records: [], lease: leases.firstLease });
        leases.adopt(sessionId, sentAt);
        // Past the lease's length: only renewals keep it from another process.
        await new Promise((resolve) => setTimeout(resolve, 3 * LEASE_MS));
        expect(await store.tryAcquire(sessionId, 'another-process', 60_000)).to.equal(undefined);
        expect(lost).to.deep.equal([]);
        expect(await leases.acquire(sessionId, 1000)).to.deep.equal({ generation: FIRST_LEASE_GENERATION, reused: true });
        leases.release(sessionId);
        leases.release(sessionId);
        leases.giveBack(sessionId);
        for (let waited = 0; leases.heldCount > 0 && waited < 2000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
        expect(await store.tryAcquire(sessionId, 'another-process', 60_000)).to.deep.equal({ generation: FIRST_LEASE_GENERATION + 1 });
      } finally {
        await leases.close();
      }
    });

    it('calls a lease lost when another process took it after it lapsed', async () => {
      const lost: string[] = [];
      const leases = new SessionLeases({ store, writer: new DurableWriter(new EventBus()), settings: { leaseMs: LEASE_MS }, onLost: (sessionId) => lost.push(sessionId) });
      try {
        const sessionId = randomUUID();
        await leases.acquire(sessionId, 1000);
        await sql`update session_leases set expires_at = now() - interval '1 second' where session_id = ${sessionId}`.execute(database.db);
        expect(await store.tryAcquire(sessionId, 'another-process', 60_000)).to.deep.equal({ generation: 2 });
        for (let waited = 0; lost.length === 0 && waited < 2000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
        expect(lost).to.deep.equal([sessionId]);
        expect(leases.heldCount).to.equal(0);
      } finally {
        await leases.close();
      }
    });
  });
}
