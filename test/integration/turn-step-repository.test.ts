import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { TurnStepStore } from '../../runtime/ports.js';
import { sql } from 'kysely';
import { createSessionRepository, createTurnStepRepository, migrateToLatest } from '../../storage/index.js';
import { databaseTargets, type TestDatabase } from '../support/databases.js';

for (const target of databaseTargets()) {
  describe(`createTurnStepRepository on ${target.name}`, () => {
    let database: TestDatabase;
    let steps: TurnStepStore;

    before(async () => {
      database = await target.open({ vector: false });
      await migrateToLatest(database, { vector: false, embeddingDimensions: 3 });
      steps = createTurnStepRepository(database.db);
    });
    after(async () => {
      await database?.close();
    });

    it("keeps a turn's steps, each as first stored, and finds them by the turn's anchor only", async () => {
      const session = randomUUID();
      await steps.record(session, 'turn-a', 'round:0', '{"n":1}');
      await steps.record(session, 'turn-a', 'result:call_1', '{"n":2}');
      // A step stored again (a retried write whose first try committed) is left as it was.
      await steps.record(session, 'turn-a', 'round:0', '{"n":3}');
      expect(await steps.load(session, 'turn-a')).to.deep.equal(new Map([['round:0', '{"n":1}'], ['result:call_1', '{"n":2}']]));
      expect(await steps.load(session, 'turn-b')).to.deep.equal(new Map());
    });

    it("drops the session's steps of an earlier turn when a step of another turn is stored, and no other session's", async () => {
      const [session, other] = [randomUUID(), randomUUID()];
      await steps.record(session, 'turn-a', 'round:0', 'a');
      await steps.record(other, 'turn-a', 'round:0', 'other');
      await steps.record(session, 'turn-b', 'round:0', 'b');
      expect(await steps.load(session, 'turn-a')).to.deep.equal(new Map());
      expect(await steps.load(session, 'turn-b')).to.deep.equal(new Map([['round:0', 'b']]));
      expect(await steps.load(other, 'turn-a')).to.deep.equal(new Map([['round:0', 'other']]));
    });

    it('stores the steps of concurrent turns together (one statement), each in its session', async () => {
      const sessions = Array.from({ length: 5 }, () => randomUUID());
      await Promise.all(sessions.flatMap((session) => [steps.record(session, 't', 'round:0', session), steps.record(session, 't', 'result:c', `${session}-result`)]));
      for (const session of sessions) {
        expect(await steps.load(session, 't')).to.deep.equal(new Map([['round:0', session], ['result:c', `${session}-result`]]));
      }
    });

    it('finds the turns abandoned: with stored settings, quiet past their lease (or by their newest step, alone), not ended unanswered, in live sessions', async () => {
      const sessions = createSessionRepository(database.db);
      const [quiet, held, lapsedJustNow, neverLeased, unanswered, deleted, withoutSettings] = Array.from({ length: 7 }, () => randomUUID()) as [string, string, string, string, string, string, string];
      for (const session of [quiet, held, lapsedJustNow, neverLeased, unanswered, deleted, withoutSettings]) {
        await sessions.claim(session, 'alice');
        await steps.record(session, 'turn', session === withoutSettings ? 'round:0' : 'settings', '{}');
      }
      const lease = (session: string, expiresInMs: number) =>
        sql`insert into session_leases (session_id, holder, generation, expires_at) values (${session}, 'a-process', 1, now() + ${expiresInMs} * interval '1 millisecond')`.execute(database.db);
      await lease(quiet, -10_000);
      await lease(held, 10_000);
      await lease(lapsedJustNow, -100);
      await lease(unanswered, -10_000);
      await lease(deleted, -10_000);
      await lease(withoutSettings, -10_000);
      await sql`update sessions set snapshot = '{"unanswered": true}'::jsonb where session_id = ${unanswered}`.execute(database.db);
      await sessions.markDeleted(deleted);
      const ours = new Set([quiet, held, lapsedJustNow, neverLeased, unanswered, deleted, withoutSettings]);
      const found = async (quietMs: number, leases: boolean) => (await steps.abandoned(quietMs, leases, 100)).map((row) => row.sessionId).filter((id) => ours.has(id));
      expect(await found(5_000, true)).to.have.members([quiet, neverLeased]);
      // Alone on its database, a process goes by the age of the newest step: these were just stored.
      expect(await found(5_000, false)).to.deep.equal([]);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await found(10, false)).to.have.members([quiet, held, lapsedJustNow, neverLeased]);
      expect((await steps.abandoned(10, false, 100)).find((row) => row.sessionId === quiet)).to.deep.equal({ sessionId: quiet, userId: 'alice' });
    });

    it("clears a session's steps", async () => {
      const session = randomUUID();
      await steps.record(session, 't', 'round:0', 'x');
      await steps.clear(session);
      expect(await steps.load(session, 't')).to.deep.equal(new Map());
    });
  });
}
