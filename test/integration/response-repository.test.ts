import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { ResponseStore } from '../../runtime/ports.js';
import { createResponseRepository, migrateToLatest } from '../../storage/index.js';
import { databaseTargets } from '../support/databases.js';
import type { TestDatabase } from '../support/databases.js';

for (const target of databaseTargets()) {
  describe(`createResponseRepository on ${target.name}`, () => {
    let database: TestDatabase;
    let store: ResponseStore;

    before(async () => {
      database = await target.open({ vector: false });
      await migrateToLatest(database, { vector: false, embeddingDimensions: 3 });
      store = createResponseRepository(database.db);
    });
    after(async () => {
      await database?.close();
    });

    it('gives back a stored response as it was put, its JSON parsed and a creation time added', async () => {
      const id = `resp_${randomUUID().replaceAll('-', '')}`;
      const body = { id, object: 'response', output: [{ type: 'message', content: [{ type: 'output_text', text: 'Echo: \u{1F600} "quoted"' }] }], metadata: { a: '1' } };
      const input = [{ id: 'msg_1', type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] }];
      await store.put({ id, userId: 'alice', sessionId: 's-1', previousResponseId: 'resp_before', historyHash: 'h1', body, input });
      const stored = await store.get(id);
      expect(stored).to.deep.include({ id, userId: 'alice', sessionId: 's-1', previousResponseId: 'resp_before', historyHash: 'h1', body, input });
      expect(stored!.createdAt).to.be.instanceOf(Date);
    });

    it('stores a lone surrogate of a reply as U+FFFD instead of failing the write', async () => {
      const id = `resp_${randomUUID().replaceAll('-', '')}`;
      await store.put({ id, userId: 'alice', sessionId: 's-2', previousResponseId: null, historyHash: 'h', body: { text: 'a\ud800b' }, input: [] });
      expect((await store.get(id))!.body).to.deep.equal({ text: 'a\uFFFDb' });
    });

    it('deletes a response once: the second delete and a later get find nothing', async () => {
      const id = `resp_${randomUUID().replaceAll('-', '')}`;
      await store.put({ id, userId: 'alice', sessionId: 's-3', previousResponseId: null, historyHash: 'h', body: {}, input: [] });
      expect(await store.remove(id)).to.equal(true);
      expect(await store.remove(id)).to.equal(false);
      expect(await store.get(id)).to.equal(undefined);
    });
  });
}
