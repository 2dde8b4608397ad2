import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sql } from 'kysely';
import { FIRST_LEASE_GENERATION, type LeaseGrant, type SessionCursor, type SessionProgress, type SessionStore } from '../../runtime/ports.js';
import { createSessionRepository, migrateToLatest } from '../../storage/index.js';
import { createSessionLeaseRepository } from '../../storage/session-lease-repository.js';
import { databaseTargets } from '../support/databases.js';
import type { TestDatabase } from '../support/databases.js';

function progress(overrides: Partial<SessionProgress> = {}): SessionProgress {
  return {
    snapshot: { status: 'active', value: 'ask_user', context: { messages: [{ role: 'user', content: 'héllo "there"' }], n: 2 } },
    currentState: 'ask_user',
    transitions: 2,
    historyHash: 'hash-1',
    ...overrides,
  };
}

for (const target of databaseTargets()) {
  describe(`createSessionRepository on ${target.name}`, () => {
    let database: TestDatabase;
    let store: SessionStore;

    before(async () => {
      database = await target.open();
      await migrateToLatest(database, { vector: target.hasVector, embeddingDimensions: 3 });
      store = createSessionRepository(database.db);
    });
    after(async () => {
      await database?.close();
    });

    /** Sets last_active directly, so ordering tests need not wait for the clock. */
    async function setLastActive(sessionId: string, at: Date): Promise<void> {
      await sql`update sessions set last_active = ${at} where session_id = ${sessionId}`.execute(database.db);
    }

    it('stores the turn records in order and the progress together when completing a turn', async () => {
      const sessionId = randomUUID();
      await store.claim(sessionId, 'user-a');
      const records = ['tool_call', 'tool', 'assistant'].map((role, index) => ({ userId: 'user-a', sessionId, role, message: `m${index}` }));
      await store.completeTurn(sessionId, records, progress({ historyHash: 'after-turn', transitions: 5 }));
      const rows = await database.db.selectFrom('conversations').select(['role', 'message']).where('session_id', '=', sessionId).orderBy('id').execute();
      expect(rows).to.deep.equal(records.map(({ role, message }) => ({ role, message })));
      expect(await store.get(sessionId)).to.include({ historyHash: 'after-turn', transitions: 5, currentState: 'ask_user' });
    });

    it('stores a turn whose reply and snapshot hold a lone UTF-16 surrogate (as U+FFFD) instead of failing the write', async () => {
      const sessionId = randomUUID();
      await store.claim(sessionId, 'user-a');
      const reply = 'Echo: broken \ud800 text';
      const snapshot = { status: 'active', value: 'ask_user', context: { reply: { content: reply }, messages: [] } };
      await store.completeTurn(sessionId, [{ userId: 'user-a', sessionId, role: 'assistant', message: reply }], progress({ snapshot, historyHash: 'surrogate' }));
      const rows = await database.db.selectFrom('conversations').select('message').where('session_id', '=', sessionId).execute();
      expect(rows).to.deep.equal([{ message: 'Echo: broken \ufffd text' }]);
      const stored = await store.get(sessionId);
      expect(stored).to.include({ historyHash: 'surrogate' });
      expect(stored!.snapshot).to.deep.equal({ ...snapshot, context: { ...snapshot.context, reply: { content: 'Echo: broken \ufffd text' } } });
    });

    it('records only the progress when a turn completes with no records', async () => {
      const sessionId = randomUUID();
      await store.claim(sessionId, 'user-a');
      await store.completeTurn(sessionId, [], progress({ historyHash: 'unchanged-turn' }));
      expect(await store.get(sessionId)).to.include({ historyHash: 'unchanged-turn' });
      const count = await database.db.selectFrom('conversations').select((eb) => eb.fn.countAll<string>().as('n')).where('session_id', '=', sessionId).executeTakeFirstOrThrow();
      expect(Number(count.n)).to.equal(0);
    });

    it('creates a session with its metadata, history hash and first records in order', async () => {
      const sessionId = `conv_${randomUUID()}`;
      const created = await store.create({
        sessionId,
        userId: 'user-a',
        metadata: { topic: 'démo' },
        historyHash: 'after-items',
        records: [
          { role: 'system', message: 'Be brief.' },
          { role: 'user', message: 'hi' },
          { role: 'assistant', message: 'hello' },
        ],
      });
      expect(created).to.include({ sessionId, userId: 'user-a', historyHash: 'after-items', transitions: 0, deletedAt: null });
      expect(created.metadata).to.deep.equal({ topic: 'démo' });
      expect(created.createdAt).to.be.instanceOf(Date);
      expect((await store.get(sessionId))!.metadata).to.deep.equal({ topic: 'démo' });
      const rows = await database.db.selectFrom('conversations').select(['user_id', 'role', 'message']).where('session_id', '=', sessionId).orderBy('id').execute();
      expect(rows).to.deep.equal([
        { user_id: 'user-a', role: 'system', message: 'Be brief.' },
        { user_id: 'user-a', role: 'user', message: 'hi' },
        { user_id: 'user-a', role: 'assistant', message: 'hello' },
      ]);
    });

    it('stores neither the session nor its records when creating a session whose id is taken', async () => {
      const sessionId = randomUUID();
      await store.claim(sessionId, 'user-a');
      const attempt = store.create({ sessionId, userId: 'user-b', metadata: {}, historyHash: null, records: [{ role: 'user', message: 'lost' }] });
      await attempt.then(
        () => expect.fail('the second create was accepted'),
        () => undefined,
      );
      expect(await store.get(sessionId)).to.include({ userId: 'user-a' });
      const count = await database.db.selectFrom('conversations').select((eb) => eb.fn.countAll<string>().as('n')).where('session_id', '=', sessionId).executeTakeFirstOrThrow();
      expect(Number(count.n)).to.equal(0);
    });

    it('reads a session without metadata as {} when getting, claiming and listing it', async () => {
      const sessionId = randomUUID();
      const userId = `user-${randomUUID()}`;
      expect((await store.claim(sessionId, userId)).metadata).to.deep.equal({});
      expect((await store.get(sessionId))!.metadata).to.deep.equal({});
      expect((await store.list({ userId, limit: 1 })).sessions[0]!.metadata).to.deep.equal({});
    });

    it("replaces the metadata of the user's live session only when updating it", async () => {
      const sessionId = randomUUID();
      await store.create({ sessionId, userId: 'user-a', metadata: { a: '1', b: '2' }, historyHash: null, records: [] });
      const updated = await store.updateMetadata(sessionId, 'user-a', { c: '3' });
      expect(updated!.metadata).to.deep.equal({ c: '3' });
      expect(await store.updateMetadata(sessionId, 'user-b', { stolen: 'yes' })).to.equal(undefined);
      expect(await store.updateMetadata(randomUUID(), 'user-a', { c: '4' })).to.equal(undefined);
      await store.markDeleted(sessionId);
      expect(await store.updateMetadata(sessionId, 'user-a', { c: '5' })).to.equal(undefined);
      expect((await store.get(sessionId))!.metadata).to.deep.equal({ c: '3' });
    });

    it("finds a user's recent sessions whose first turn was never answered, newest first: none ended, or ended at the empty history", async () => {
      const userId = `user-${randomUUID()}`;
      const [died, cancelled, answered, deleted, old, others] = [randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID()];
      for (const sessionId of [died, cancelled, answered, deleted, old]) await store.claim(sessionId, userId);
      await store.claim(others, `user-${randomUUID()}`);
      await store.saveProgress(cancelled, progress({ historyHash: 'empty-hash' }));
      await store.saveProgress(answered, progress({ historyHash: 'after-a-reply' }));
      await store.markDeleted(deleted);
      const now = Date.now();
      await setLastActive(died, new Date(now - 2_000));
      await setLastActive(cancelled, new Date(now - 1_000));
      await setLastActive(old, new Date(now - 120_000));
      expect(await store.unansweredFirstTurns(userId, 'empty-hash', 60_000, 5)).to.deep.equal([cancelled, died]);
      expect(await store.unansweredFirstTurns(userId, 'empty-hash', 60_000, 1)).to.deep.equal([cancelled]);
    });

    it('keeps the metadata when a turn ends or progress is saved', async () => {
      const sessionId = randomUUID();
      const userId = `user-${randomUUID()}`;
      await store.create({ sessionId, userId, metadata: { keep: 'me' }, historyHash: null, records: [] });
      await store.completeTurn(sessionId, [{ userId, sessionId, role: 'assistant', message: 'reply' }], progress());
      await store.saveProgress(sessionId, progress({ transitions: 4 }));
      expect((await store.get(sessionId))!.metadata).to.deep.equal({ keep: 'me' });
      expect((await store.list({ userId, limit: 1 })).sessions[0]!.metadata).to.deep.equal({ keep: 'me' });
    });

    it('stores the usage a turn ends with, keeps it when one ends without, and sums a user\'s sessions by model, deleted ones too', async () => {
      const userId = `user-${randomUUID()}`;
      const [first, second] = [randomUUID(), randomUUID()];
      await store.create({ sessionId: first, userId, metadata: {}, historyHash: null, records: [] });
      await store.create({ sessionId: second, userId, metadata: {}, historyHash: null, records: [] });
      expect((await store.get(first))!.usage).to.deep.equal({});
      await store.completeTurn(first, [], progress({ usage: { big: { prompt_tokens: 10, completion_tokens: 2 }, small: { prompt_tokens: 1, completion_tokens: 1 } } }));
      await store.completeTurn(first, [], progress({ transitions: 4 }));
      await store.completeTurn(second, [], progress({ usage: { big: { prompt_tokens: 5, completion_tokens: 3 } } }));
      expect((await store.get(first))!.usage).to.deep.equal({ big: { prompt_tokens: 10, completion_tokens: 2 }, small: { prompt_tokens: 1, completion_tokens: 1 } });
      await store.markDeleted(second);

      expect(await store.usageOf(userId)).to.deep.equal({
        sessions: 2,
        usage: { big: { prompt_tokens: 15, completion_tokens: 5 }, small: { prompt_tokens: 1, completion_tokens: 1 } },
      });
      expect(await store.usageOf(`nobody-${randomUUID()}`)).to.deep.equal({ sessions: 0, usage: {} });
    });

    describe('a turn ending under its lease (completeTurn with a fence)', () => {
      const leases = () => createSessionLeaseRepository(database);
      const answer = (sessionId: string, message: string) => [{ userId: 'user-a', sessionId, role: 'assistant', message }];

      /** Lets the session's lease lapse, as a database outage longer than the lease would. */
      async function lapse(sessionId: string): Promise<void> {
        await sql`update session_leases set expires_at = now() - interval '1 second' where session_id = ${sessionId}`.execute(database.db);
      }

      it('stores the snapshot while the lease is still the one the turn ran under, lapsed or not', async () => {
        const sessionId = randomUUID();
        await store.claim(sessionId, 'user-a');
        const { generation } = (await leases().tryAcquire(sessionId, 'process-a', 60_000))!;
        expect(await store.completeTurn(sessionId, answer(sessionId, 'one'), progress({ historyHash: 'a-1' }), { holder: 'process-a', generation })).to.equal(true);
        await lapse(sessionId);
        expect(await store.completeTurn(sessionId, [], progress({ historyHash: 'a-2' }), { holder: 'process-a', generation })).to.equal(true);
        expect(await store.get(sessionId)).to.include({ historyHash: 'a-2' });
      });

      it("keeps the snapshot of the process that took the lease since, and still stores the late turn's records", async () => {
        const sessionId = randomUUID();
        await store.claim(sessionId, 'user-a');
        const first = (await leases().tryAcquire(sessionId, 'process-a', 60_000))!;
        await lapse(sessionId);
        const second = (await leases().tryAcquire(sessionId, 'process-b', 60_000))!;
        expect(await store.completeTurn(sessionId, answer(sessionId, 'from b'), progress({ historyHash: 'b', transitions: 4 }), { holder: 'process-b', generation: second.generation })).to.equal(
          true,
        );

        const late = await store.completeTurn(sessionId, answer(sessionId, 'late from a'), progress({ historyHash: 'a-stale', transitions: 9 }), {
          holder: 'process-a',
          generation: first.generation,
        });
        expect(late).to.equal(false);
        expect(await store.get(sessionId)).to.include({ historyHash: 'b', transitions: 4 });
        const rows = await database.db.selectFrom('conversations').select('message').where('session_id', '=', sessionId).orderBy('id').execute();
        expect(rows.map((row) => row.message)).to.deep.equal(['from b', 'late from a']);
      });

      it('stores nothing of the snapshot when the session has no lease row at all', async () => {
        const sessionId = randomUUID();
        await store.claim(sessionId, 'user-a');
        expect(await store.completeTurn(sessionId, [], progress({ historyHash: 'unleased' }), { holder: 'process-a', generation: 1 })).to.equal(false);
        expect(await store.get(sessionId)).to.include({ historyHash: null });
      });

      it('ends the turns of concurrent sessions in one transaction, each with its own fence and outcome', async () => {
        const ids = [randomUUID(), randomUUID(), randomUUID()];
        for (const sessionId of ids) await store.claim(sessionId, 'user-a');
        const [held, moved, unfenced] = ids as [string, string, string];
        const first = (await leases().tryAcquire(held, 'process-a', 60_000))!;
        const stale = (await leases().tryAcquire(moved, 'process-a', 60_000))!;
        await lapse(moved);
        await leases().tryAcquire(moved, 'process-b', 60_000);

        const outcomes = await Promise.all([
          store.completeTurn(held, answer(held, 'held'), progress({ historyHash: 'held' }), { holder: 'process-a', generation: first.generation }),
          store.completeTurn(moved, answer(moved, 'moved'), progress({ historyHash: 'moved' }), { holder: 'process-a', generation: stale.generation }),
          store.completeTurn(unfenced, answer(unfenced, 'unfenced'), progress({ historyHash: 'unfenced' })),
        ]);

        expect(outcomes).to.deep.equal([true, false, true]);
        expect((await store.get(held))?.historyHash).to.equal('held');
        expect((await store.get(moved))?.historyHash).to.equal(null);
        expect((await store.get(unfenced))?.historyHash).to.equal('unfenced');
        // Rows written by one statement carry the id of one transaction.
        const written = await sql<{ session_id: string; message: string; xmin: string }>`
          select session_id, message, xmin::text from conversations where session_id in (${sql.join(ids)}) order by id`.execute(database.db);
        expect(written.rows.map((row) => row.message)).to.deep.equal(['held', 'moved', 'unfenced']);
        expect(new Set(written.rows.map((row) => row.xmin)).size).to.equal(1);
      });

      it('fails only the turn whose data the database refuses when turns end together', async () => {
        const [good, bad] = [randomUUID(), randomUUID()];
        for (const sessionId of [good, bad]) await store.claim(sessionId, 'user-a');
        const tooLong = [{ at: new Date(), from: 'ask_user', to: 'x'.repeat(300), reason: null }];

        const [stored, refused] = await Promise.allSettled([
          store.completeTurn(good, answer(good, 'kept'), progress({ historyHash: 'good' })),
          store.completeTurn(bad, answer(bad, 'refused'), progress({ historyHash: 'bad', transitionLog: tooLong })),
        ]);

        expect(stored).to.deep.equal({ status: 'fulfilled', value: true });
        expect(refused.status).to.equal('rejected');
        expect((await store.get(good))?.historyHash).to.equal('good');
        expect((await store.get(bad))?.historyHash).to.equal(null);
        const rows = await database.db.selectFrom('conversations').select('message').where('session_id', 'in', [good, bad]).execute();
        expect(rows.map((row) => row.message)).to.deep.equal(['kept']);
      });

      it('ends two turns of one session given together one after the other, in order', async () => {
        const sessionId = randomUUID();
        await store.claim(sessionId, 'user-a');
        const outcomes = await Promise.all([
          store.completeTurn(sessionId, answer(sessionId, 'first'), progress({ historyHash: 'first', transitions: 2 })),
          store.completeTurn(sessionId, answer(sessionId, 'second'), progress({ historyHash: 'second', transitions: 4 })),
        ]);
        expect(outcomes).to.deep.equal([true, true]);
        expect(await store.get(sessionId)).to.include({ historyHash: 'second', transitions: 4 });
        const rows = await database.db.selectFrom('conversations').select('message').where('session_id', '=', sessionId).orderBy('id').execute();
        expect(rows.map((row) => row.message)).to.deep.equal(['first', 'second']);
      });

      if (target.backend === 'postgres') {
        it('makes a process taking the lease wait until a fenced write in flight has committed', async () => {
          const sessionId = randomUUID();
          await store.claim(sessionId, 'user-a');
          const first = (await leases().tryAcquire(sessionId, 'process-a', 60_000))!;
          await lapse(sessionId);
          let taking: Promise<LeaseGrant | undefined> | undefined;
          await database.db.transaction().execute(async (trx) => {
            const stored = await createSessionRepository(trx).completeTurn(sessionId, answer(sessionId, 'in flight'), progress({ historyHash: 'a' }), {
              holder: 'process-a',
              generation: first.generation,
            });
            expect(stored).to.equal(true);
            taking = leases().tryAcquire(sessionId, 'process-b', 60_000);
            const early = await Promise.race([taking.then(() => 'taken'), new Promise((resolve) => setTimeout(() => resolve('waiting'), 300))]);
            expect(early, 'while the write is open').to.equal('waiting');
          });
          expect(await taking).to.deep.equal({ generation: first.generation + 1 });
          expect(await store.get(sessionId)).to.include({ historyHash: 'a' });
        });
      }
    });

    describe("a new session's first write (start)", () => {
      const leases = () => createSessionLeaseRepository(database);
      const turn = (sessionId: string, role: string, message: string) => ({ userId: 'user-a', sessionId, role, message });
      const recordsOf = async (sessionIds: string[]) =>
        database.db.selectFrom('conversations').select(['session_id', 'role', 'message']).where('session_id', 'in', sessionIds).orderBy('id').execute();

      it('creates the row, stores the first records in order and takes the lease at the first generation, in one transaction', async () => {
        const sessionId = randomUUID();
        await store.start({ sessionId, userId: 'user-a', records: [turn(sessionId, 'system', 'Be brief.'), turn(sessionId, 'user', 'hi')], lease: { holder: 'process-a', ttlMs: 60_000 } });
        expect(await store.get(sessionId)).to.include({ userId: 'user-a', historyHash: null, snapshot: null, transitions: 0, deletedAt: null });
        expect((await recordsOf([sessionId])).map(({ role, message }) => ({ role, message }))).to.deep.equal([
          { role: 'system', message: 'Be brief.' },
          { role: 'user', message: 'hi' },
        ]);
        // Another process finds the lease held; its holder takes it again at the next generation.
        expect(await leases().tryAcquire(sessionId, 'process-b', 60_000)).to.equal(undefined);
        expect(await leases().tryAcquire(sessionId, 'process-a', 60_000)).to.deep.equal({ generation: 2 });
        const xmins = await sql<{ xmin: string }>`
          select xmin::text from sessions where session_id = ${sessionId}
          union all select xmin::text from conversations where session_id = ${sessionId}`.execute(database.db);
        expect(new Set(xmins.rows.map((row) => row.xmin)).size).to.equal(1);
      });

      it('fences the end of the first turn with the lease the start took', async () => {
        const sessionId = randomUUID();
        await store.start({ sessionId, userId: 'user-a', records: [turn(sessionId, 'user', 'hi')], lease: { holder: 'process-a', ttlMs: 60_000 } });
        expect(await store.completeTurn(sessionId, [turn(sessionId, 'assistant', 'hello')], progress({ historyHash: 'h-1' }), { holder: 'process-a', generation: FIRST_LEASE_GENERATION })).to.equal(true);
        expect(await store.completeTurn(sessionId, [], progress({ historyHash: 'h-2' }), { holder: 'process-b', generation: FIRST_LEASE_GENERATION })).to.equal(false);
        expect(await store.get(sessionId)).to.include({ historyHash: 'h-1' });
      });

      it('takes no lease when given none', async () => {
        const sessionId = randomUUID();
        await store.start({ sessionId, userId: 'user-a', records: [turn(sessionId, 'user', 'hi')] });
        expect(await store.get(sessionId)).to.include({ userId: 'user-a' });
        expect(await leases().tryAcquire(sessionId, 'process-b', 60_000)).to.deep.equal({ generation: 1 });
      });

      it('starts the sessions of concurrent turns in one transaction, each with its own records', async () => {
        const ids = [randomUUID(), randomUUID(), randomUUID()];
        await Promise.all(ids.map((sessionId, index) => store.start({ sessionId, userId: 'user-a', records: [turn(sessionId, 'user', `m${index}`), turn(sessionId, 'user', `n${index}`)] })));
        const rows = await recordsOf(ids);
        for (const [index, sessionId] of ids.entries()) {
          expect(rows.filter((row) => row.session_id === sessionId).map((row) => row.message)).to.deep.equal([`m${index}`, `n${index}`]);
        }
        const written = await sql<{ xmin: string }>`select xmin::text from sessions where session_id in (${sql.join(ids)})`.execute(database.db);
        expect(new Set(written.rows.map((row) => row.xmin)).size).to.equal(1);
      });

      it('stores nothing of a start whose id is taken, and still starts the sessions started with it', async () => {
        const [taken, free] = [randomUUID(), randomUUID()];
        await store.claim(taken, 'user-b');
        const [refused, started] = await Promise.allSettled([
          store.start({ sessionId: taken, userId: 'user-a', records: [turn(taken, 'user', 'lost')], lease: { holder: 'process-a', ttlMs: 60_000 } }),
          store.start({ sessionId: free, userId: 'user-a', records: [turn(free, 'user', 'kept')], lease: { holder: 'process-a', ttlMs: 60_000 } }),
        ]);
        expect(refused.status).to.equal('rejected');
        expect(started.status).to.equal('fulfilled');
        expect(await store.get(taken)).to.include({ userId: 'user-b' });
        expect((await recordsOf([taken, free])).map((row) => row.message)).to.deep.equal(['kept']);
        expect(await leases().tryAcquire(taken, 'process-b', 60_000)).to.deep.equal({ generation: 1 });
      });
    });

    it('creates a fresh session owned by the user when claiming an unknown id', async () => {
      const sessionId = randomUUID();
      const session = await store.claim(sessionId, 'user-a');

      expect(session).to.include({ sessionId, userId: 'user-a', historyHash: null, currentState: null, transitions: 0, deletedAt: null, created: true });
      expect(session.snapshot).to.equal(null);
      expect(session.createdAt).to.be.instanceOf(Date);
      expect(session.lastActive).to.be.instanceOf(Date);
      const { created: _created, ...record } = session;
      expect(await store.get(sessionId)).to.deep.equal(record);
    });

    it('returns the existing row of the first user when a second user claims the same id', async () => {
      const sessionId = randomUUID();
      const first = await store.claim(sessionId, 'user-a');
      const second = await store.claim(sessionId, 'user-b');

      expect(second.userId).to.equal('user-a');
      expect(first.created).to.equal(true);
      expect(second).to.deep.equal({ ...first, created: false });
    });

    it('creates one row whichever claim wins when claims run concurrently', async () => {
      const sessionId = randomUUID();
      const users = ['user-a', 'user-b', 'user-c', 'user-d', 'user-e', 'user-f'];
      const claimed = await Promise.all(users.map((userId) => store.claim(sessionId, userId)));

      const owners = new Set(claimed.map((session) => session.userId));
      expect(owners.size).to.equal(1);
      expect(claimed.filter((session) => session.created)).to.have.length(1);
      const { rows } = await sql<{ count: number }>`
        select count(*)::int as count from sessions where session_id = ${sessionId}`.execute(database.db);
      expect(rows[0]?.count).to.equal(1);
    });

    it('returns undefined when getting an unknown session', async () => {
      expect(await store.get(randomUUID())).to.equal(undefined);
    });

    it('round-trips the JSON snapshot and bookkeeping when saving progress', async () => {
      const sessionId = randomUUID();
      const claimed = await store.claim(sessionId, 'user-a');
      await setLastActive(sessionId, new Date('2020-01-01T00:00:00Z'));
      await store.saveProgress(sessionId, progress());

      const saved = await store.get(sessionId);
      expect(saved?.snapshot).to.deep.equal(progress().snapshot);
      expect(saved).to.include({ currentState: 'ask_user', transitions: 2, historyHash: 'hash-1', userId: 'user-a' });
      expect(saved!.lastActive.getTime()).to.be.greaterThan(new Date('2020-01-01T00:00:00Z').getTime());
      expect(saved!.createdAt.getTime()).to.equal(claimed.createdAt.getTime());
    });

    it('stores a snapshot that is a JSON array or string as it was given', async () => {
      const sessionId = randomUUID();
      await store.claim(sessionId, 'user-a');

      await store.saveProgress(sessionId, progress({ snapshot: [1, 'two', { three: 3 }] }));
      expect((await store.get(sessionId))?.snapshot).to.deep.equal([1, 'two', { three: 3 }]);
      await store.saveProgress(sessionId, progress({ snapshot: 'just text' }));
      expect((await store.get(sessionId))?.snapshot).to.equal('just text');
    });

    it('finds the live session of the user when looking up its history hash', async () => {
      const sessionId = randomUUID();
      const hash = `hash-${randomUUID()}`;
      await store.claim(sessionId, 'user-a');
      await store.saveProgress(sessionId, progress({ historyHash: hash }));

      expect((await store.findByHistoryHash('user-a', hash))?.sessionId).to.equal(sessionId);
      expect(await store.findByHistoryHash('user-b', hash)).to.equal(undefined);
      expect(await store.findByHistoryHash('user-a', 'no-such-hash')).to.equal(undefined);
    });

    it('ignores deleted sessions when looking up a history hash', async () => {
      const sessionId = randomUUID();
      const hash = `hash-${randomUUID()}`;
      await store.claim(sessionId, 'user-a');
      await store.saveProgress(sessionId, progress({ historyHash: hash }));
      await store.markDeleted(sessionId);

      expect(await store.findByHistoryHash('user-a', hash)).to.equal(undefined);
    });

    it('marks the session deleted and clears its snapshot when deleting it', async () => {
      const sessionId = randomUUID();
      await store.claim(sessionId, 'user-a');
      await store.saveProgress(sessionId, progress());
      await store.markDeleted(sessionId);

      const deleted = await store.get(sessionId);
      expect(deleted?.deletedAt).to.be.instanceOf(Date);
      expect(deleted?.snapshot).to.equal(null);
      expect(deleted?.currentState).to.equal('ask_user');
    });

    it('keeps the first deletion time when deleting a session twice', async () => {
      const sessionId = randomUUID();
      await store.claim(sessionId, 'user-a');
      await store.markDeleted(sessionId);
      const first = (await store.get(sessionId))!.deletedAt!;
      await store.markDeleted(sessionId);
      expect((await store.get(sessionId))!.deletedAt!.getTime()).to.equal(first.getTime());
    });

    it('drops the write when saving progress of a deleted session', async () => {
      const sessionId = randomUUID();
      await store.claim(sessionId, 'user-a');
      await store.markDeleted(sessionId);
      await store.saveProgress(sessionId, progress());

      const session = await store.get(sessionId);
      expect(session?.snapshot).to.equal(null);
      expect(session?.transitions).to.equal(0);
    });

    it('returns the deleted row when claiming a deleted session', async () => {
      const sessionId = randomUUID();
      await store.claim(sessionId, 'user-a');
      await store.markDeleted(sessionId);
      expect((await store.claim(sessionId, 'user-a')).deletedAt).to.be.instanceOf(Date);
    });

    it('lists the user sessions most recently active first and pages with the cursor of the last', async () => {
      const userId = `user-${randomUUID()}`;
      const ids = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
      for (const [index, sessionId] of ids.entries()) {
        await store.claim(sessionId, userId);
        await setLastActive(sessionId, new Date(Date.UTC(2024, 0, 1 + index)));
      }
      await store.claim(randomUUID(), `other-${randomUUID()}`);

      const firstPage = await store.list({ userId, limit: 3 });
      expect(firstPage.sessions.map((session) => session.sessionId)).to.deep.equal([ids[3], ids[2], ids[1]]);
      expect(firstPage.next).to.deep.equal({ lastActiveMicros: String(Date.UTC(2024, 0, 2) * 1000), sessionId: ids[1] });
      const secondPage = await store.list({ userId, limit: 3, after: firstPage.next! });
      expect(secondPage.sessions.map((session) => session.sessionId)).to.deep.equal([ids[0]]);
      expect(secondPage.next).to.equal(null);
    });

    it('pages through sessions active at the same time, and within one millisecond, each listed once', async () => {
      const userId = `user-${randomUUID()}`;
      const ids = Array.from({ length: 7 }, (_, index) => `tied-${index}-${randomUUID()}`);
      for (const [index, sessionId] of ids.entries()) {
        await store.claim(sessionId, userId);
        // Four at one instant, three a few microseconds apart within the same millisecond.
        const micros = index < 4 ? 0 : index;
        await sql`update sessions set last_active = timestamptz '2024-05-01T00:00:00.123Z' + ${micros} * interval '1 microsecond' where session_id = ${sessionId}`.execute(
          database.db,
        );
      }
      const listed: string[] = [];
      let after: SessionCursor | undefined;
      for (let pages = 0; pages < 10; pages += 1) {
        const page = await store.list({ userId, limit: 2, ...(after ? { after } : {}) });
        listed.push(...page.sessions.map((session) => session.sessionId));
        if (!page.next) break;
        after = page.next;
      }
      expect(listed).to.have.length(7);
      expect(new Set(listed)).to.deep.equal(new Set(ids));
    });

    it('leaves deleted sessions out when listing', async () => {
      const userId = `user-${randomUUID()}`;
      const kept = randomUUID();
      const deleted = randomUUID();
      await store.claim(kept, userId);
      await store.claim(deleted, userId);
      await store.markDeleted(deleted);

      expect((await store.list({ userId, limit: 10 })).sessions.map((session) => session.sessionId)).to.deep.equal([kept]);
    });

    it('lists sessions of every user when no user is given', async () => {
      const first = randomUUID();
      const second = randomUUID();
      await store.claim(first, `user-${randomUUID()}`);
      await store.claim(second, `user-${randomUUID()}`);
      // Far in the future, so no session of another test comes first.
      await setLastActive(first, new Date('2999-01-02T00:00:00Z'));
      await setLastActive(second, new Date('2999-01-01T00:00:00Z'));

      const { sessions: listed } = await store.list({ limit: 2 });
      expect(listed.map((session) => session.sessionId)).to.deep.equal([first, second]);
      expect(new Set(listed.map((session) => session.userId)).size).to.equal(2);
    });
  });
}
