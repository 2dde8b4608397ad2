import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { TurnStepStore } from '../../runtime/ports.js';
import { createTurnStepRepository, migrateToLatest } from '../../storage/index.js';
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

    it("clears a session's steps", async () => {
      const session = randomUUID();
      await steps.record(session, 't', 'round:0', 'x');
      await steps.clear(session);
      expect(await steps.load(session, 't')).to.deep.equal(new Map());
    });
  });
}
