import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { ConversationStore, NewConversationRecord } from '../../runtime/ports.js';
import { createConversationRepository, migrateToLatest } from '../../storage/index.js';
import { databaseTargets } from '../support/databases.js';
import type { TestDatabase } from '../support/databases.js';

function turns(sessionId: string, count: number, userId = 'user-a'): NewConversationRecord[] {
  return Array.from({ length: count }, (_, index) => ({
    userId,
    sessionId,
    role: index % 2 === 0 ? 'user' : 'assistant',
    message: `message ${index}`,
  }));
}

for (const target of databaseTargets()) {
  describe(`createConversationRepository on ${target.name}`, () => {
    let database: TestDatabase;
    let store: ConversationStore;

    before(async () => {
      database = await target.open();
      await migrateToLatest(database, { vector: target.hasVector, embeddingDimensions: 3 });
      store = createConversationRepository(database.db);
    });
    after(async () => {
      await database?.close();
    });

    it('returns the records with increasing ids in the given order when appending', async () => {
      const sessionId = randomUUID();
      const stored = await store.append(turns(sessionId, 5));

      expect(stored.map((record) => record.message)).to.deep.equal(turns(sessionId, 5).map((record) => record.message));
      const ids = stored.map((record) => record.id);
      expect(ids).to.deep.equal([...ids].sort((a, b) => a - b));
      expect(new Set(ids).size).to.equal(5);
      expect(stored[0]).to.include({ userId: 'user-a', sessionId, role: 'user', message: 'message 0' });
      expect(stored[0]?.createdAt).to.be.instanceOf(Date);
    });

    it('reads the first user message of several sessions at once, leaving out a session with none', async () => {
      const [first, second, silent] = [randomUUID(), randomUUID(), randomUUID()];
      await store.append([
        { userId: 'user-a', sessionId: first, role: 'system', message: 'be brief' },
        ...turns(first, 4),
        ...turns(second, 2).map((record) => ({ ...record, message: `second ${record.message}` })),
        { userId: 'user-a', sessionId: silent, role: 'assistant', message: 'hello first' },
      ]);
      const firsts = await store.firstUserMessages([first, second, silent, randomUUID()]);
      expect([...firsts.entries()].sort()).to.deep.equal([[first, 'message 0'], [second, 'second message 0']].sort());
      expect((await store.firstUserMessages([])).size).to.equal(0);
    });

    it('stores nothing and returns an empty list when appending no records', async () => {
      expect(await store.append([])).to.deep.equal([]);
    });

    it('keeps the records of concurrent appends to one session each in their order', async () => {
      const sessionId = randomUUID();
      const batches = [0, 1, 2, 3].map((batch) =>
        turns(sessionId, 3).map((record) => ({ ...record, message: `${batch}:${record.message}` })),
      );
      await Promise.all(batches.map((batch) => store.append(batch)));

      const stored = await store.page(sessionId, { limit: 100 });
      expect(stored).to.have.length(12);
      for (let batch = 0; batch < 4; batch += 1) {
        const ofBatch = stored.filter((record) => record.message.startsWith(`${batch}:`)).map((record) => record.message);
        expect(ofBatch).to.deep.equal([`${batch}:message 0`, `${batch}:message 1`, `${batch}:message 2`]);
      }
    });

    it('stores nothing when one record of an append is invalid', async () => {
      const sessionId = randomUUID();
      const records = turns(sessionId, 3);
      records[2] = { ...records[2]!, role: 'r'.repeat(51) };

      let failure: unknown;
      await store.append(records).catch((error: unknown) => {
        failure = error;
      });
      expect(failure).to.have.property('code', '22001');
      expect(await store.count(sessionId)).to.equal(0);
    });

    it('commits concurrent appends of several sessions together, each getting back its own records', async () => {
      const sessions = [randomUUID(), randomUUID(), randomUUID()];
      const results = await Promise.all(sessions.map((sessionId, index) => store.append(turns(sessionId, index + 1))));
      results.forEach((stored, index) => {
        expect(stored.map((record) => [record.sessionId, record.message])).to.deep.equal(turns(sessions[index]!, index + 1).map((record) => [record.sessionId, record.message]));
      });
      // Committed together: one statement numbers all rows, one session after the other.
      const ids = results.flat().map((record) => record.id);
      expect(ids).to.deep.equal([...ids].sort((a, b) => a - b));
    });

    it('fails only the append whose record is invalid when appends of several sessions commit together', async () => {
      const [good, bad] = [randomUUID(), randomUUID()];
      const invalid = turns(bad, 2);
      invalid[1] = { ...invalid[1]!, role: 'r'.repeat(51) };
      const [kept, refused] = await Promise.allSettled([store.append(turns(good, 2)), store.append(invalid)]);
      expect(kept.status).to.equal('fulfilled');
      expect(refused).to.have.nested.property('reason.code', '22001');
      expect(await store.count(good)).to.equal(2);
      expect(await store.count(bad)).to.equal(0);
    });

    it('returns the last N records oldest first when asked for recent turns', async () => {
      const sessionId = randomUUID();
      await store.append(turns(sessionId, 7));
      await store.append(turns(randomUUID(), 3));

      const recent = await store.recent(sessionId, 3);
      expect(recent.map((record) => record.message)).to.deep.equal(['message 4', 'message 5', 'message 6']);
    });

    it('returns every record when fewer than N exist', async () => {
      const sessionId = randomUUID();
      await store.append(turns(sessionId, 2));
      expect((await store.recent(sessionId, 10)).map((record) => record.message)).to.deep.equal(['message 0', 'message 1']);
    });

    it('returns nothing when the recent limit is zero or negative', async () => {
      const sessionId = randomUUID();
      await store.append(turns(sessionId, 2));
      expect(await store.recent(sessionId, 0)).to.deep.equal([]);
      expect(await store.recent(sessionId, -1)).to.deep.equal([]);
    });

    it('pages through a session oldest first when given the last id seen', async () => {
      const sessionId = randomUUID();
      const stored = await store.append(turns(sessionId, 5));

      const first = await store.page(sessionId, { limit: 2 });
      const second = await store.page(sessionId, { afterId: first.at(-1)!.id, limit: 2 });
      const third = await store.page(sessionId, { afterId: second.at(-1)!.id, limit: 2 });
      const rest = await store.page(sessionId, { afterId: third.at(-1)!.id, limit: 2 });

      expect([...first, ...second, ...third].map((record) => record.id)).to.deep.equal(stored.map((record) => record.id));
      expect(third).to.have.length(1);
      expect(rest).to.deep.equal([]);
    });

    it('pages through a session newest first when asked for descending order, from the last id seen', async () => {
      const sessionId = randomUUID();
      const stored = await store.append(turns(sessionId, 5));
      await store.append(turns(randomUUID(), 2));

      const first = await store.page(sessionId, { limit: 2, order: 'desc' });
      const second = await store.page(sessionId, { afterId: first.at(-1)!.id, limit: 2, order: 'desc' });
      const third = await store.page(sessionId, { afterId: second.at(-1)!.id, limit: 2, order: 'desc' });

      expect([...first, ...second, ...third].map((record) => record.id)).to.deep.equal(stored.map((record) => record.id).reverse());
      expect(third).to.have.length(1);
      expect(await store.page(sessionId, { afterId: third[0]!.id, limit: 2, order: 'desc' })).to.deep.equal([]);
    });

    it('pages from an id past the column range without failing, in either order', async () => {
      const sessionId = randomUUID();
      const stored = await store.append(turns(sessionId, 2));
      const huge = Number.MAX_SAFE_INTEGER;
      expect(await store.page(sessionId, { afterId: huge, limit: 5 })).to.deep.equal([]);
      expect((await store.page(sessionId, { afterId: huge, limit: 5, order: 'desc' })).map((record) => record.id)).to.deep.equal(stored.map((record) => record.id).reverse());
    });

    it('counts only the records of the session when counting', async () => {
      const sessionId = randomUUID();
      await store.append(turns(sessionId, 4));
      await store.append(turns(randomUUID(), 2));
      expect(await store.count(sessionId)).to.equal(4);
      expect(await store.count(randomUUID())).to.equal(0);
    });

    it('deletes only the session records and reports how many when deleting a session', async () => {
      const sessionId = randomUUID();
      const otherSessionId = randomUUID();
      await store.append(turns(sessionId, 3));
      await store.append(turns(otherSessionId, 2));

      expect(await store.deleteSession(sessionId)).to.equal(3);
      expect(await store.count(sessionId)).to.equal(0);
      expect(await store.count(otherSessionId)).to.equal(2);
      expect(await store.deleteSession(sessionId)).to.equal(0);
    });
  });
}
