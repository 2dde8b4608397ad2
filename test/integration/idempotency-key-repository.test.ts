import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sql } from 'kysely';
import type { IdempotencyKeyStore } from '../../runtime/ports.js';
import { createIdempotencyKeyRepository, migrateToLatest } from '../../storage/index.js';
import { databaseTargets, type TestDatabase } from '../support/databases.js';

const ANSWER = { status: 200, headers: { 'content-type': 'application/json; charset=utf-8', 'x-session-id': 's1' }, body: '{"id":"chatcmpl-1"}' };

for (const target of databaseTargets()) {
  describe(`createIdempotencyKeyRepository on ${target.name}`, () => {
    let database: TestDatabase;
    let keys: IdempotencyKeyStore;

    before(async () => {
      database = await target.open({ vector: false });
      await migrateToLatest(database, { vector: false, embeddingDimensions: 3 });
      keys = createIdempotencyKeyRepository(database.db);
    });
    after(async () => {
      await database?.close();
    });

    const claimOf = (requestHash = 'hash-a') => ({ userId: 'ada', key: randomUUID(), requestHash });

    /** Moves a column of a key's row into the past, as if its holder had died or its time had run out. */
    async function lapse(key: string, column: 'lease_until' | 'expires_at'): Promise<void> {
      await sql`update idempotency_keys set ${sql.ref(column)} = now() - interval '1 second' where idempotency_key = ${key}`.execute(database.db);
    }

    it('gives a new key to its first request only, and keeps the answer it records', async () => {
      const claim = claimOf();
      expect(await keys.claim(claim, 'process-a', 60_000, 86_400_000)).to.deep.equal({ requestHash: 'hash-a', state: 'running', holder: 'process-a', answer: null, takenOver: false });
      expect(await keys.claim(claim, 'process-b', 60_000, 86_400_000)).to.equal(undefined);
      await keys.finish(claim.userId, claim.key, 'process-a', ANSWER);
      expect(await keys.get(claim.userId, claim.key)).to.deep.equal({ requestHash: 'hash-a', state: 'done', holder: 'process-a', answer: ANSWER });
      // A recorded answer is never taken over, even once its holder stopped renewing.
      await lapse(claim.key, 'lease_until');
      expect(await keys.claim(claim, 'process-b', 60_000, 86_400_000)).to.equal(undefined);
    });

    it('claims and records concurrent keys together, and gives one key claimed twice at once to one claim', async () => {
      const [a, b] = [claimOf(), claimOf()];
      const [first, second, again] = await Promise.all([
        keys.claim(a, 'process-a', 60_000, 86_400_000),
        keys.claim(b, 'process-a', 60_000, 86_400_000),
        keys.claim(a, 'process-b', 60_000, 86_400_000),
      ]);
      expect(first).to.deep.include({ holder: 'process-a', takenOver: false });
      expect(second).to.deep.include({ holder: 'process-a', takenOver: false });
      expect(again).to.equal(undefined);
      await Promise.all([keys.finish(a.userId, a.key, 'process-a', ANSWER), keys.finish(b.userId, b.key, 'process-a', { ...ANSWER, status: 400 })]);
      expect((await keys.get(a.userId, a.key))!.answer).to.deep.equal(ANSWER);
      expect((await keys.get(b.userId, b.key))!.answer).to.deep.equal({ ...ANSWER, status: 400 });
    });

    it('keeps keys apart by user', async () => {
      const claim = claimOf();
      expect(await keys.claim(claim, 'process-a', 60_000, 86_400_000)).not.to.equal(undefined);
      expect(await keys.claim({ ...claim, userId: 'bob' }, 'process-a', 60_000, 86_400_000)).not.to.equal(undefined);
      expect(await keys.get('carol', claim.key)).to.equal(undefined);
    });

    it('lets the same request take over a running key whose holder stopped renewing, and the old holder can no longer record', async () => {
      const claim = claimOf();
      await keys.claim(claim, 'process-a', 60_000, 86_400_000);
      expect(await keys.renew(claim.userId, claim.key, 'process-a', 60_000)).to.equal(true);
      await lapse(claim.key, 'lease_until');
      // Another request with the key is not the one that runs under it: it does not take it over.
      expect(await keys.claim({ ...claim, requestHash: 'hash-b' }, 'process-b', 60_000, 86_400_000)).to.equal(undefined);
      expect(await keys.claim(claim, 'process-b', 60_000, 86_400_000)).to.deep.include({ holder: 'process-b', state: 'running', takenOver: true });
      expect(await keys.renew(claim.userId, claim.key, 'process-a', 60_000)).to.equal(false);
      await keys.finish(claim.userId, claim.key, 'process-a', ANSWER);
      await keys.release(claim.userId, claim.key, 'process-a');
      expect(await keys.get(claim.userId, claim.key)).to.deep.include({ holder: 'process-b', state: 'running', answer: null });
    });

    it('gives a key back when its holder releases it, for the next request to run afresh', async () => {
      const claim = claimOf();
      await keys.claim(claim, 'process-a', 60_000, 86_400_000);
      await keys.release(claim.userId, claim.key, 'process-a');
      expect(await keys.get(claim.userId, claim.key)).to.equal(undefined);
      expect(await keys.claim({ ...claim, requestHash: 'hash-b' }, 'process-b', 60_000, 86_400_000)).to.deep.include({ requestHash: 'hash-b' });
    });

    it('forgets an expired key: it reads as absent, a new request may use it, and the sweep deletes it', async () => {
      const reused = claimOf();
      await keys.claim(reused, 'process-a', 60_000, 86_400_000);
      await keys.finish(reused.userId, reused.key, 'process-a', ANSWER);
      await lapse(reused.key, 'expires_at');
      expect(await keys.get(reused.userId, reused.key)).to.equal(undefined);
      expect(await keys.claim({ ...reused, requestHash: 'hash-b' }, 'process-b', 60_000, 86_400_000)).to.deep.include({ requestHash: 'hash-b', state: 'running' });
      const swept = claimOf();
      await keys.claim(swept, 'process-a', 60_000, 86_400_000);
      await lapse(swept.key, 'expires_at');
      expect(await keys.deleteExpired()).to.be.at.least(1);
      const { rows } = await sql<{ count: string | number }>`select count(*) as count from idempotency_keys where idempotency_key = ${swept.key}`.execute(database.db);
      expect(Number(rows[0]!.count)).to.equal(0);
    });
  });
}
