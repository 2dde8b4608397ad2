import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { SessionProgress, SessionStore, TransitionRecord } from '../../runtime/ports.js';
import { createConversationRepository, createSessionRepository, migrateToLatest } from '../../storage/index.js';
import { databaseTargets } from '../support/databases.js';
import type { TestDatabase } from '../support/databases.js';
import { rejection } from '../support/rejection.js';

/** A turn's transitions: user state to agent, a tool round, and back to the user state. */
function turnLog(start: number): TransitionRecord[] {
  const at = (offset: number) => new Date(Date.UTC(2025, 0, 1, 10, 0, 0, start * 10 + offset));
  return [
    { at: at(0), from: 'ask_user', to: 'agent_reply', reason: 'user_message' },
    { at: at(1), from: 'agent_reply', to: 'use_tool', reason: 'tool_calls' },
    { at: at(2), from: 'use_tool', to: 'agent_reply', reason: 'tool_results' },
    { at: at(3), from: 'agent_reply', to: 'ask_user', reason: null },
  ];
}

function progress(transitions: number, transitionLog: TransitionRecord[]): SessionProgress {
  return { snapshot: { value: 'ask_user' }, currentState: 'ask_user', transitions, historyHash: null, transitionLog };
}

for (const target of databaseTargets()) {
  describe(`session transition log on ${target.name}`, () => {
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

    async function newSession(): Promise<string> {
      const sessionId = randomUUID();
      await store.claim(sessionId, 'user-a');
      return sessionId;
    }

    it('stores the log in order with the records when completing a turn', async () => {
      const sessionId = await newSession();
      const log = turnLog(0);
      await store.completeTurn(sessionId, [{ userId: 'user-a', sessionId, role: 'assistant', message: 'done' }], progress(4, log));

      const stored = await store.listTransitions(sessionId, { limit: 10 });
      expect(stored.map(({ id: _id, ...transition }) => transition)).to.deep.equal(log);
      expect(stored.map((transition) => transition.id)).to.deep.equal([...stored.map((transition) => transition.id)].sort((a, b) => a - b));
      expect(await createConversationRepository(database.db).count(sessionId)).to.equal(1);
    });

    it('stores the log when a turn completes with no records', async () => {
      const sessionId = await newSession();
      await store.completeTurn(sessionId, [], progress(4, turnLog(0)));
      expect((await store.listTransitions(sessionId, { limit: 10 })).map((transition) => transition.to)).to.deep.equal([
        'agent_reply',
        'use_tool',
        'agent_reply',
        'ask_user',
      ]);
    });

    it('stores the log when saving progress', async () => {
      const sessionId = await newSession();
      await store.saveProgress(sessionId, progress(4, turnLog(0)));
      expect(await store.listTransitions(sessionId, { limit: 10 })).to.have.length(4);
    });

    it('appends each turn after the earlier ones', async () => {
      const sessionId = await newSession();
      await store.completeTurn(sessionId, [], progress(4, turnLog(0)));
      await store.completeTurn(sessionId, [], progress(8, turnLog(1)));
      const stored = await store.listTransitions(sessionId, { limit: 10 });
      expect(stored.map((transition) => transition.at.getTime())).to.deep.equal([...turnLog(0), ...turnLog(1)].map((entry) => entry.at.getTime()));
    });

    it('does not log a turn twice when its committed write is retried', async () => {
      const sessionId = await newSession();
      await store.completeTurn(sessionId, [], progress(4, turnLog(0)));
      await store.completeTurn(sessionId, [], progress(4, turnLog(0)));
      expect(await store.listTransitions(sessionId, { limit: 10 })).to.have.length(4);
    });

    it('drops the log of a deleted session', async () => {
      const sessionId = await newSession();
      await store.markDeleted(sessionId);
      await store.completeTurn(sessionId, [], progress(4, turnLog(0)));
      expect(await store.listTransitions(sessionId, { limit: 10 })).to.deep.equal([]);
    });

    it('stores nothing of the turn when its log cannot be stored', async () => {
      const sessionId = await newSession();
      const log = [{ ...turnLog(0)[0]!, to: 'x'.repeat(300) }];
      const records = [{ userId: 'user-a', sessionId, role: 'assistant', message: 'lost' }];

      expect(await rejection(store.completeTurn(sessionId, records, progress(1, log)))).to.be.instanceOf(Error);
      expect(await createConversationRepository(database.db).count(sessionId)).to.equal(0);
      expect((await store.get(sessionId))?.transitions).to.equal(0);
    });

    it('pages a session log by id, each transition once and in order', async () => {
      const sessionId = await newSession();
      const other = await newSession();
      await store.completeTurn(other, [], progress(4, turnLog(5)));
      await store.completeTurn(sessionId, [], progress(4, turnLog(0)));
      await store.completeTurn(sessionId, [], progress(8, turnLog(1)));

      const pages = [];
      let afterId: number | undefined;
      for (;;) {
        const page = await store.listTransitions(sessionId, { limit: 3, ...(afterId !== undefined ? { afterId } : {}) });
        if (page.length === 0) break;
        pages.push(page);
        afterId = page.at(-1)!.id;
      }
      expect(pages.map((page) => page.length)).to.deep.equal([3, 3, 2]);
      const seen = pages.flat();
      expect(seen.map((transition) => transition.at.getTime())).to.deep.equal([...turnLog(0), ...turnLog(1)].map((entry) => entry.at.getTime()));
      expect(new Set(seen.map((transition) => transition.id)).size).to.equal(8);
    });

    it('lists nothing when the limit is 0', async () => {
      const sessionId = await newSession();
      await store.completeTurn(sessionId, [], progress(4, turnLog(0)));
      expect(await store.listTransitions(sessionId, { limit: 0 })).to.deep.equal([]);
    });

    it('deletes only the session log when deleting transitions', async () => {
      const sessionId = await newSession();
      const other = await newSession();
      await store.completeTurn(sessionId, [], progress(4, turnLog(0)));
      await store.completeTurn(other, [], progress(4, turnLog(0)));

      expect(await store.deleteTransitions(sessionId)).to.equal(4);
      expect(await store.listTransitions(sessionId, { limit: 10 })).to.deep.equal([]);
      expect(await store.listTransitions(other, { limit: 10 })).to.have.length(4);
    });
  });
}
