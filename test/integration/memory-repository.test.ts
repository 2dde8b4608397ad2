import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sql, type Kysely, type KyselyPlugin } from 'kysely';
import type { VectorMemoryStore } from '../../runtime/ports.js';
import type { DatabaseSchema } from '../../storage/database-schema.js';
import { createMemoryRepository, createStores, migrateToLatest } from '../../storage/index.js';
import { databaseTargets } from '../support/databases.js';
import type { TestDatabase } from '../support/databases.js';

for (const target of databaseTargets().filter((each) => each.hasVector)) {
  describe(`createMemoryRepository on ${target.name}`, () => {
    let database: TestDatabase;
    let store: VectorMemoryStore;

    before(async () => {
      database = await target.open();
      await migrateToLatest(database, { vector: true, embeddingDimensions: 3 });
      store = createMemoryRepository(database.db);
    });
    after(async () => {
      await database?.close();
    });

    it('returns the entries with ids in the given order when adding', async () => {
      const userId = `user-${randomUUID()}`;
      const sessionId = randomUUID();
      const added = await store.add([
        { userId, sessionId, content: 'likes tea', embedding: [1, 0, 0] },
        { userId, sessionId, content: 'lives in Oslo', embedding: [0, 1, 0] },
      ]);

      expect(added.map((entry) => entry.content)).to.deep.equal(['likes tea', 'lives in Oslo']);
      expect(added[0]!.id).to.be.lessThan(added[1]!.id);
      expect(added[0]).to.include({ userId, sessionId });
      expect(added[0]!.createdAt).to.be.instanceOf(Date);
      expect(added[0]).to.not.have.property('embedding');
    });

    it('returns the nearest entries first with their cosine distance when searching', async () => {
      const userId = `user-${randomUUID()}`;
      const sessionId = randomUUID();
      await store.add([
        { userId, sessionId, content: 'far', embedding: [0, 0, 1] },
        { userId, sessionId, content: 'same direction', embedding: [2, 0, 0] },
        { userId, sessionId, content: 'near', embedding: [1, 1, 0] },
      ]);

      const found = await store.search(userId, [1, 0, 0], 2);
      expect(found.map((entry) => entry.content)).to.deep.equal(['same direction', 'near']);
      expect(found[0]!.distance).to.be.closeTo(0, 1e-6);
      expect(found[1]!.distance).to.be.closeTo(1 - Math.SQRT1_2, 1e-6);
    });

    it('never returns the memories of another user when searching', async () => {
      const userA = `user-${randomUUID()}`;
      const userB = `user-${randomUUID()}`;
      await store.add([
        { userId: userA, sessionId: randomUUID(), content: 'secret of A', embedding: [1, 0, 0] },
        { userId: userB, sessionId: randomUUID(), content: 'note of B', embedding: [0, 0, 1] },
      ]);

      const found = await store.search(userB, [1, 0, 0], 10);
      expect(found.map((entry) => entry.content)).to.deep.equal(['note of B']);
      expect(await store.search(`user-${randomUUID()}`, [1, 0, 0], 10)).to.deep.equal([]);
    });

    /** Runs `search` on one connection where the planner must take the HNSW index, whose scan gives up after 10 candidates and 10 more tuples. */
    async function searchWithShortIndexScan<T>(search: (connection: Kysely<DatabaseSchema>) => Promise<T>): Promise<T> {
      return database.db.connection().execute(async (connection) => {
        await sql`analyze memories`.execute(connection);
        await sql`set enable_seqscan = off`.execute(connection);
        await sql`set enable_bitmapscan = off`.execute(connection);
        await sql`set enable_sort = off`.execute(connection);
        await sql`set hnsw.ef_search = 10`.execute(connection);
        await sql`set hnsw.max_scan_tuples = 10`.execute(connection);
        try {
          return await search(connection);
        } finally {
          for (const setting of ['enable_seqscan', 'enable_bitmapscan', 'enable_sort', 'hnsw.ef_search', 'hnsw.max_scan_tuples']) await sql`reset ${sql.raw(setting)}`.execute(connection);
        }
      });
    }

    /** 200 memories of one user pointing roughly along [1, 0, 0], in the way of a search for anyone else. */
    async function addCrowd(): Promise<void> {
      const crowd = `crowd-${randomUUID()}`;
      await store.add(
        Array.from({ length: 200 }, (_, index) => ({
          userId: crowd,
          sessionId: 'crowd-session',
          content: `crowd ${index}`,
          embedding: [1, 0.01 * (index % 40), 0.001 * index],
        })),
      );
    }

    it('returns every memory of a user with few, nearest first, where an index scan would give up before reaching them', async () => {
      await addCrowd();
      const few = `user-${randomUUID()}`;
      await store.add([
        { userId: few, sessionId: randomUUID(), content: 'far', embedding: [0, 0, 1] },
        { userId: few, sessionId: randomUUID(), content: 'near', embedding: [0, 1, 0.2] },
        { userId: few, sessionId: randomUUID(), content: 'nearest', embedding: [0, 1, 0] },
      ]);

      const found = await searchWithShortIndexScan((connection) => createMemoryRepository(connection).search(few, [0, 1, 0], 5));
      expect(found.map((entry) => entry.content)).to.deep.equal(['nearest', 'near', 'far']);
    });

    it('measures every memory of the user when the index scan gives up before it finds enough of them', async () => {
      await addCrowd();
      const many = `user-${randomUUID()}`;
      // Away from the query, which points into the crowd: the index meets the crowd first.
      await store.add(Array.from({ length: 6 }, (_, index) => ({ userId: many, sessionId: randomUUID(), content: `mine ${index}`, embedding: [-0.1 * index, 1, 0] })));

      // Above `exactSearchUpTo` the index is tried first.
      const found = await searchWithShortIndexScan((connection) => createMemoryRepository(connection, { exactSearchUpTo: 2 }).search(many, [1, 0, 0], 4));
      expect(found.map((entry) => entry.content)).to.deep.equal(['mine 0', 'mine 1', 'mine 2', 'mine 3']);
    });

    it("turns on pgvector's iterative scan, so the HNSW index finds a user's few memories among many of another user", async () => {
      await addCrowd();
      const loner = `user-${randomUUID()}`;
      await store.add([{ userId: loner, sessionId: randomUUID(), content: 'the only one', embedding: [0, 1, 0] }]);

      // One connection, so the planner settings that force the index apply to the query.
      const { plan, found } = await database.db.connection().execute(async (connection) => {
        await sql`analyze memories`.execute(connection);
        await sql`set enable_seqscan = off`.execute(connection);
        await sql`set enable_sort = off`.execute(connection);
        try {
          const query = sql<{ content: string }>`select content from memories where user_id = ${loner} order by embedding <=> '[1,0,0]'::vector limit 3`;
          const { rows } = await sql<Record<string, string>>`explain ${query}`.execute(connection);
          return { plan: rows.map((row) => Object.values(row).join(' ')).join('\n'), found: (await query.execute(connection)).rows };
        } finally {
          await sql`reset enable_seqscan`.execute(connection);
          await sql`reset enable_sort`.execute(connection);
        }
      });

      expect(plan).to.contain('memories_embedding_hnsw_idx');
      expect(found.map((row) => row.content)).to.deep.equal(['the only one']);
    });

    it('searches the HNSW index with its efSearch, set for that search alone', async () => {
      await addCrowd();
      const many = `user-${randomUUID()}`;
      await store.add(Array.from({ length: 4 }, (_, index) => ({ userId: many, sessionId: randomUUID(), content: `mine ${index}`, embedding: [1, 0.1 * index, 0] })));
      const statements: Array<{ sql: string; parameters: readonly unknown[] }> = [];
      const spy: KyselyPlugin = {
        transformQuery(args) {
          const compiled = database.db.getExecutor().compileQuery(args.node, args.queryId);
          statements.push({ sql: compiled.sql, parameters: compiled.parameters });
          return args.node;
        },
        transformResult: async (args) => args.result,
      };

      const { found, after } = await searchWithShortIndexScan(async (connection) => {
        const found = await createMemoryRepository(connection.withPlugin(spy), { exactSearchUpTo: 2, efSearch: 7 }).search(many, [1, 0, 0], 2);
        const { rows } = await sql<{ value: string }>`select current_setting('hnsw.ef_search') as value`.execute(connection);
        return { found, after: rows[0]!.value };
      });

      expect(found.map((entry) => entry.content)).to.deep.equal(['mine 0', 'mine 1']);
      const setting = statements.findIndex((statement) => statement.sql.includes("set_config('hnsw.ef_search'"));
      const search = statements.findIndex((statement) => /from "memories"/.test(statement.sql) && statement.sql.includes('<=>'));
      expect(statements[setting]?.parameters).to.deep.equal(['7']);
      expect(search).to.be.greaterThan(setting);
      // The connection keeps what it had (10, set by the helper): the setting was its transaction's.
      expect(after).to.equal('10');
    });

    it('returns nothing when the search limit is zero', async () => {
      const userId = `user-${randomUUID()}`;
      await store.add([{ userId, sessionId: randomUUID(), content: 'x', embedding: [1, 0, 0] }]);
      expect(await store.search(userId, [1, 0, 0], 0)).to.deep.equal([]);
    });

    it('counts, lists and deletes only the entries of the session when asked by session', async () => {
      const userId = `user-${randomUUID()}`;
      const sessionId = randomUUID();
      const otherSessionId = randomUUID();
      await store.add([
        { userId, sessionId, content: 'one', embedding: [1, 0, 0] },
        { userId, sessionId, content: 'two', embedding: [0, 1, 0] },
        { userId, sessionId: otherSessionId, content: 'other', embedding: [0, 0, 1] },
      ]);

      expect(await store.countBySession(sessionId)).to.equal(2);
      expect((await store.listBySession(sessionId)).map((entry) => entry.content)).to.deep.equal(['one', 'two']);
      expect(await store.deleteBySession(sessionId)).to.equal(2);
      expect(await store.countBySession(sessionId)).to.equal(0);
      expect(await store.listBySession(otherSessionId)).to.have.length(1);
    });

    it('rejects an embedding with the wrong number of dimensions when adding', async () => {
      let failure: unknown;
      await store
        .add([{ userId: 'user-a', sessionId: randomUUID(), content: 'x', embedding: [1, 0] }])
        .catch((error: unknown) => {
          failure = error;
        });
      expect(failure).to.be.instanceOf(Error);
      expect((failure as Error).message).to.match(/expected 3 dimensions, not 2/);
    });

    it('rejects an embedding that is not finite numbers before querying', async () => {
      let failure: unknown;
      await store.search('user-a', [1, Number.NaN, 0], 3).catch((error: unknown) => {
        failure = error;
      });
      expect(failure).to.be.instanceOf(TypeError);
    });

    if (target.backend === 'pglite-socket') {
      it('parses vectors into number arrays when a pg connection opens after the migration', async () => {
        const userId = `user-${randomUUID()}`;
        await store.add([{ userId, sessionId: randomUUID(), content: 'x', embedding: [0.5, 0.25, 1] }]);
        // A new pool: its connections find the vector type and register pgvector's parsers.
        const peer = await database.openPeer();
        const row = await peer.db.selectFrom('memories').select('embedding').where('user_id', '=', userId).executeTakeFirstOrThrow();
        expect(row.embedding).to.deep.equal([0.5, 0.25, 1]);
      });
    }

    it('includes the memory store when the database has vector support', () => {
      const stores = createStores(database);
      expect(stores.memories).to.not.equal(undefined);
      expect(stores.conversations).to.not.equal(undefined);
      expect(stores.sessions).to.not.equal(undefined);
    });
  });
}
