import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sql } from 'kysely';
import { AutoAnalyze } from '../../storage/auto-analyze.js';
import { createDatabase, createStores, migrateToLatest, type Database } from '../../storage/index.js';
import { databaseTargets, type TestDatabase } from '../support/databases.js';

describe('AutoAnalyze (on PGlite, which runs no autovacuum)', () => {
  let database: Database;
  const errors: Error[] = [];

  before(async () => {
    database = await createDatabase({ dataDir: 'memory://', vector: true });
    await migrateToLatest(database, { vector: true, embeddingDimensions: 3 });
  });
  after(async () => {
    await database?.close();
  });

  async function reltuples(table: string): Promise<number> {
    const { rows } = await sql<{ reltuples: number }>`select reltuples from pg_class where oid = to_regclass(${table})`.execute(database.db);
    return Number(rows[0]!.reltuples);
  }

  async function createFilledTable(rows: number): Promise<string> {
    const table = `counted_${randomUUID().slice(0, 8)}`;
    await sql`create table ${sql.table(table)} (id int)`.execute(database.db);
    await insert(table, rows);
    return table;
  }

  async function insert(table: string, rows: number): Promise<void> {
    await sql`insert into ${sql.table(table)} select generate_series(1, ${rows})`.execute(database.db);
  }

  it('analyzes a table that never was when it is first written', async () => {
    const analyzer = new AutoAnalyze(database.db, (error) => errors.push(error));
    const table = await createFilledTable(1000);
    expect(await reltuples(table)).to.equal(-1);
    analyzer.wrote(table, 1000);
    await analyzer.settled();
    expect(await reltuples(table)).to.equal(1000);
  });

  it('analyzes again once 50 + 10% of the rows counted at the last ANALYZE have been written', async () => {
    const analyzer = new AutoAnalyze(database.db, (error) => errors.push(error));
    const table = await createFilledTable(1000);
    await sql`analyze ${sql.table(table)}`.execute(database.db);
    analyzer.wrote(table, 0);
    await analyzer.settled();

    await insert(table, 140);
    analyzer.wrote(table, 140);
    await analyzer.settled();
    expect(await reltuples(table), 'below 150 written rows').to.equal(1000);

    await insert(table, 10);
    analyzer.wrote(table, 10);
    await analyzer.settled();
    expect(await reltuples(table)).to.equal(1150);
  });

  it('reports a failed ANALYZE and starts none after it is closed', async () => {
    const failures: Error[] = [];
    const analyzer = new AutoAnalyze(database.db, (error) => failures.push(error));
    analyzer.wrote('no_such_table', 100);
    await analyzer.settled();
    expect(failures.map((error) => error.message)).to.deep.equal(['relation "no_such_table" does not exist']);

    const table = await createFilledTable(10);
    await analyzer.close();
    analyzer.wrote(table, 10_000);
    await analyzer.settled();
    expect(await reltuples(table)).to.equal(-1);
  });

});

// A server's autovacuum may be off (as on the test server) or come round a minute later: the service analyzes there too.
for (const target of databaseTargets()) {
  describe(`the tables' statistics on ${target.name}`, () => {
    let database: TestDatabase;

    before(async () => {
      database = await target.open();
      await migrateToLatest(database, { vector: true, embeddingDimensions: 3 });
    });
    after(async () => {
      await database?.close();
    });

    async function reltuples(table: string): Promise<number> {
      const { rows } = await sql<{ reltuples: number }>`select reltuples from pg_class where oid = to_regclass(${table})`.execute(database.db);
      return Number(rows[0]!.reltuples);
    }

    it('are kept fresh as the stores write memories', async () => {
      const stores = createStores(database);
      const entries = Array.from({ length: 120 }, (_, index) => ({ userId: 'analyzed-user', sessionId: 'analyzed-session', content: `memory ${index}`, embedding: [1, index, 0] }));
      await stores.memories!.add(entries);
      await database.autoAnalyze.settled();
      expect(await reltuples('memories')).to.equal(120);
    });

    it('are kept fresh as sessions start, so the prepared turn statements are planned on their real size', async () => {
      const stores = createStores(database);
      const lease = { holder: 'analyzed-holder', ttlMs: 60_000 };
      const started = Array.from({ length: 120 }, (_, index) => ({ sessionId: `analyzed-${index}`, userId: 'analyzed-user', records: [], lease }));
      await Promise.all(started.map((start) => stores.sessions.start(start)));
      // The first write analyzed the tables that never were, while the others were written:
      // those count towards the next ANALYZE, which the next new session starts.
      await database.autoAnalyze.settled();
      await stores.sessions.claim('analyzed-claimed', 'analyzed-user');
      await database.autoAnalyze.settled();
      expect(await reltuples('sessions')).to.be.greaterThanOrEqual(120);
      expect(await reltuples('session_leases')).to.be.greaterThanOrEqual(120);
    });
  });
}

