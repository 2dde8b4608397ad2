import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { sql } from 'kysely';
import { createDatabase, createStores, migrateToLatest } from '../../storage/index.js';

describe('createDatabase', () => {
  describe('without a url', () => {
    let folder: string;

    before(async () => {
      folder = await mkdtemp(join(tmpdir(), 'storage-test-'));
    });
    after(async () => {
      await rm(folder, { recursive: true, force: true });
    });

    it('creates missing parent folders and keeps the data when reopening the embedded database', async () => {
      const dataDir = join(folder, 'nested', 'deeper', 'data');
      const first = await createDatabase({ url: '', dataDir, vector: false });
      expect(first.kind).to.equal('pglite');
      await migrateToLatest(first, { vector: false, embeddingDimensions: 256 });
      await createStores(first).sessions.claim('kept-session', 'user-a');
      await first.close();

      expect((await stat(dataDir)).isDirectory()).to.equal(true);
      const second = await createDatabase({ dataDir, vector: false });
      try {
        expect((await createStores(second).sessions.get('kept-session'))?.userId).to.equal('user-a');
        expect(createStores(second).memories).to.equal(undefined);
      } finally {
        await second.close();
      }
    });
  });

  const serverUrl = process.env.TEST_DATABASE_URL;
  if (serverUrl) {
    describe('with the PostgreSQL server (TEST_DATABASE_URL)', () => {
      it('reports an idle connection that the server dropped and keeps serving queries', async () => {
        let reported!: (error: Error) => void;
        const idleError = new Promise<Error>((resolve) => {
          reported = resolve;
        });
        const database = await createDatabase({ url: serverUrl, dataDir: 'unused', vector: false, poolSize: 1, onIdleError: reported });
        const admin = await createDatabase({ url: serverUrl, dataDir: 'unused', vector: false, poolSize: 1 });
        try {
          const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(database.db);
          await sql`select pg_terminate_backend(${rows[0]!.pid})`.execute(admin.db);

          expect((await idleError).message).to.match(/terminat/i);
          const { rows: after } = await sql<{ one: number }>`select 1 as one`.execute(database.db);
          expect(after[0]?.one).to.equal(1);
        } finally {
          await Promise.all([database.close(), admin.close()]);
        }
      });
    });
  }
});
