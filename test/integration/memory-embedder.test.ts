import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sql } from 'kysely';
import { ConfigError } from '../../config/load-config.js';
import { startFakeLlm, type FakeLlm } from '../../scripts/fake-llm-server.js';
import { chooseEmbedder, createLocalEmbedder, type EmbedderOptions } from '../../runtime/llm/embedder.js';
import type { EmbedderRecordStore, VectorMemoryStore } from '../../runtime/ports.js';
import { createEmbedderRecordRepository, createMemoryRepository, migrateToLatest, reembedMemories } from '../../storage/index.js';
import { databaseTargets, type TestDatabase } from '../support/databases.js';

const DIMENSIONS = 8;

for (const target of databaseTargets().filter((each) => each.hasVector)) {
  describe(`the memories' embedder on ${target.name}`, () => {
    let llm: FakeLlm;
    let database: TestDatabase;
    let records: EmbedderRecordStore;
    let memories: VectorMemoryStore;
    const options = (mode: EmbedderOptions['mode'], model = 'embedder-a'): EmbedderOptions => ({
      mode,
      baseUrl: llm.url,
      apiKey: 'key',
      model,
      dimensions: DIMENSIONS,
      timeoutMs: 2000,
    });

    before(async () => {
      llm = await startFakeLlm({ embeddingDimensions: DIMENSIONS });
    });
    beforeEach(async () => {
      database = await target.open();
      await migrateToLatest(database, { vector: true, embeddingDimensions: DIMENSIONS });
      records = createEmbedderRecordRepository(database.db);
      memories = createMemoryRepository(database.db);
    });
    afterEach(async () => {
      llm.setBehaviour({ embeddings: true });
      await database?.close();
    });
    after(async () => {
      await llm?.close();
    });

    async function storeOneMemory(): Promise<void> {
      const [embedding] = await createLocalEmbedder(DIMENSIONS).embed(['likes tea']);
      await memories.add([{ userId: 'ada', sessionId: randomUUID(), content: 'likes tea', embedding: embedding! }]);
    }

    async function failureOf(promise: Promise<unknown>): Promise<Error> {
      return promise.then(
        () => {
          throw new Error('expected a failure');
        },
        (error: Error) => error,
      );
    }

    it('records what auto chose on the first start, and keeps it on the next one whatever the LLM server offers then', async () => {
      const first = await chooseEmbedder(options('auto'), records);
      expect(first.embedder.source).to.equal('llm');
      expect(await records.get()).to.deep.equal({ source: 'llm', model: 'embedder-a' });

      llm.setBehaviour({ embeddings: false });
      const again = await chooseEmbedder(options('auto'), records);
      expect(again).to.deep.include({ reason: 'the stored memories were made with it' });
      expect(again.embedder.source).to.equal('llm');
    });

    it("records one embedder when two first starts with auto choose together, one finding the LLM server's embeddings and the other not: the second uses the first's", async () => {
      // Two processes' records on one database; the second's LLM server offers no embeddings.
      const peer = await database.openPeer();
      const unreachable = await startFakeLlm({ embeddingDimensions: DIMENSIONS, embeddings: false });
      try {
        const peerRecords = createEmbedderRecordRepository(peer.db);
        const [first, second] = await Promise.all([
          chooseEmbedder(options('auto'), records),
          chooseEmbedder({ ...options('auto'), baseUrl: unreachable.url }, peerRecords),
        ]);
        const recorded = await records.get();
        expect(first.embedder.source, 'the first start uses the record').to.equal(recorded!.source);
        expect(second.embedder.source, 'the second start uses the record').to.equal(recorded!.source);
      } finally {
        await unreachable.close();
        if (peer !== database) await peer.close();
      }
    });

    it('keeps the local embedder that auto chose once, when the LLM server offers embeddings later', async () => {
      llm.setBehaviour({ embeddings: false });
      expect((await chooseEmbedder(options('auto'), records)).embedder.source).to.equal('local');
      llm.setBehaviour({ embeddings: true });
      expect((await chooseEmbedder(options('auto'), records)).embedder.source).to.equal('local');
    });

    it('refuses to start with another embedder than the one the stored memories were made with, saying how to go on', async () => {
      await chooseEmbedder(options('llm'), records);
      await storeOneMemory();

      const local = await failureOf(chooseEmbedder(options('local'), records));
      expect(local).to.be.instanceOf(ConfigError);
      expect(local.message).to.contain("embedded by the LLM server's model 'embedder-a', and this configuration embeds with the local embedder");
      expect(local.message).to.contain('svc-agent memory reembed').and.to.contain('npm run memory:reembed');

      const otherModel = await failureOf(chooseEmbedder(options('auto', 'embedder-b'), records));
      expect(otherModel).to.be.instanceOf(ConfigError);
      expect(otherModel.message).to.contain("llm.embedding_model to 'embedder-a'");
      expect(await records.get()).to.deep.equal({ source: 'llm', model: 'embedder-a' });
    });

    it('lets another embedder replace the record while no memory is stored', async () => {
      await chooseEmbedder(options('llm'), records);
      expect((await chooseEmbedder(options('local'), records)).embedder.source).to.equal('local');
      expect(await records.get()).to.deep.equal({ source: 'local', model: null });
    });

    it('re-embeds every memory with the new embedder and records it, so the service starts with it', async () => {
      await chooseEmbedder(options('local'), records);
      const local = createLocalEmbedder(DIMENSIONS);
      const texts = Array.from({ length: 5 }, (_, index) => `memory number ${index}`);
      const vectors = await local.embed(texts);
      await memories.add(texts.map((content, index) => ({ userId: 'ada', sessionId: 's', content, embedding: vectors[index]! })));

      const embedded: string[] = [];
      const done = await reembedMemories(
        database.db,
        async (batch) => {
          embedded.push(...batch);
          return batch.map((_, index) => Array.from({ length: DIMENSIONS }, (__, dimension) => (dimension === index % DIMENSIONS ? 1 : 0)));
        },
        { source: 'llm', model: 'embedder-b' },
        { batch: 2 },
      );
      expect(done).to.equal(5);
      expect(embedded).to.deep.equal(texts);
      expect(await records.get()).to.deep.equal({ source: 'llm', model: 'embedder-b' });
      const { rows } = await sql<{ embedding: string }>`select embedding::text as embedding from memories order by id`.execute(database.db);
      expect(rows.map((row) => row.embedding)).to.deep.equal(['[1,0,0,0,0,0,0,0]', '[0,1,0,0,0,0,0,0]', '[1,0,0,0,0,0,0,0]', '[0,1,0,0,0,0,0,0]', '[1,0,0,0,0,0,0,0]']);
      expect((await chooseEmbedder(options('llm', 'embedder-b'), records)).embedder.source).to.equal('llm');
    });

    it('changes nothing when the new embedder fails part of the way', async () => {
      await chooseEmbedder(options('local'), records);
      const texts = ['one', 'two', 'three'];
      const vectors = await createLocalEmbedder(DIMENSIONS).embed(texts);
      await memories.add(texts.map((content, index) => ({ userId: 'ada', sessionId: 's', content, embedding: vectors[index]! })));
      const before = await sql<{ embedding: string }>`select embedding::text as embedding from memories order by id`.execute(database.db);

      let calls = 0;
      const failure = await failureOf(
        reembedMemories(
          database.db,
          async (batch) => {
            calls += 1;
            if (calls === 2) throw new Error('the embeddings server went away');
            return batch.map(() => Array.from({ length: DIMENSIONS }, () => 1));
          },
          { source: 'llm', model: 'embedder-b' },
          { batch: 2 },
        ),
      );
      expect(failure.message).to.equal('the embeddings server went away');
      const after = await sql<{ embedding: string }>`select embedding::text as embedding from memories order by id`.execute(database.db);
      expect(after.rows).to.deep.equal(before.rows);
      expect(await records.get()).to.deep.equal({ source: 'local', model: null });
    });
  });
}
