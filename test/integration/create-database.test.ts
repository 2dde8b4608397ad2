import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { sql } from 'kysely';
import { LOCK_FILE } from '../../storage/data-dir-lock.js';
import { createDatabase, createStores, DataDirInUseError, migrateToLatest } from '../../storage/index.js';

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

    it('creates a new folder\'s database in a child process, and runs with its settings sized for memory at rest', async () => {
      const dataDir = join(folder, 'sized');
      const children: string[] = [];
      // Published as the child is constructed, before its command line is set.
      const watch = (message: { process: { spawnargs: string[] } }) => setImmediate(() => children.push(message.process.spawnargs.join(' ')));
      const { subscribe, unsubscribe } = await import('node:diagnostics_channel');
      subscribe('child_process', watch as never);
      let database;
      try {
        database = await createDatabase({ dataDir, vector: false, sharedBuffersMb: 12 });
      } finally {
        unsubscribe('child_process', watch as never);
      }
      try {
        expect(children.filter((line) => line.includes('PGlite.create'))).to.have.length(1);
        const setting = async (name: string) => (await sql<{ value: string }>`select current_setting(${name}) as value`.execute(database.db)).rows[0]!.value;
        expect(await setting('shared_buffers')).to.equal('12MB');
        expect(await setting('max_connections')).to.equal('8');
      } finally {
        await database.close();
      }
      // An existing folder is opened in this process.
      subscribe('child_process', watch as never);
      try {
        await (await createDatabase({ dataDir, vector: false })).close();
      } finally {
        unsubscribe('child_process', watch as never);
      }
      expect(children).to.have.length(1);
    });

    it('names the folder when creating its database fails', async () => {
      const dataDir = join(folder, 'unusable');
      // No database yet, and a file where initdb makes a folder.
      await mkdir(dataDir, { recursive: true });
      await writeFile(join(dataDir, 'global'), '');
      const refused = await createDatabase({ dataDir, vector: false }).then(
        (database) => database.close().then(() => undefined),
        (error: unknown) => error,
      );
      expect(refused).to.be.instanceOf(Error);
      expect((refused as Error).message).to.include(dataDir);
    });

    it('refuses a second opening of the same data folder while the first is open, naming the folder and the process', async () => {
      const dataDir = join(folder, 'locked');
      const first = await createDatabase({ dataDir, vector: false });
      try {
        let refused: unknown;
        await createDatabase({ dataDir, vector: false }).catch((error: unknown) => (refused = error));
        expect(refused).to.be.instanceOf(DataDirInUseError);
        // The lock is this process's, so the message names this pid.
        expect((refused as Error).message).to.include(dataDir).and.include(`pid ${process.pid}`);
        expect((await readFile(join(dataDir, LOCK_FILE), 'utf8')).split('\n')[0]).to.equal(String(process.pid));
        // The first opening goes on working.
        expect((await sql<{ one: number }>`select 1 as one`.execute(first.db)).rows).to.deep.equal([{ one: 1 }]);
      } finally {
        await first.close();
      }
      expect(existsSync(join(dataDir, LOCK_FILE)), 'the lock is given back on close').to.equal(false);
      const again = await createDatabase({ dataDir, vector: false });
      await again.close();
    });

    it('takes over the lock of a process that is gone', async () => {
      const dataDir = join(folder, 'stale');
      const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
      await mkdir(dataDir, { recursive: true });
      await writeFile(join(dataDir, LOCK_FILE), `${gone.stdout}\nleft-behind\n`);
      const database = await createDatabase({ dataDir, vector: false });
      try {
        expect((await readFile(join(dataDir, LOCK_FILE), 'utf8')).split('\n')[0]).to.equal(String(process.pid));
      } finally {
        await database.close();
      }
    });

    it('refuses a folder held by another living process', async () => {
      const dataDir = join(folder, 'held');
      await mkdir(dataDir, { recursive: true });
      // This test's parent process stands in for a service that has the folder open.
      await writeFile(join(dataDir, LOCK_FILE), `${process.ppid}\nanother-service\n`);
      let refused: unknown;
      await createDatabase({ dataDir, vector: false }).catch((error: unknown) => (refused = error));
      expect(refused).to.be.instanceOf(DataDirInUseError);
      expect((refused as Error).message).to.include(`pid ${process.ppid}`);
      expect(await readFile(join(dataDir, LOCK_FILE), 'utf8')).to.equal(`${process.ppid}\nanother-service\n`);
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

      it('listens over listenUrl when it is given, and notifies through the pool', async () => {
        const listenUrl = new URL(serverUrl);
        const applicationName = `svc-listen-${process.pid}-${Date.now()}`;
        listenUrl.searchParams.set('application_name', applicationName);
        const database = await createDatabase({ url: serverUrl, listenUrl: listenUrl.toString(), dataDir: 'unused', vector: false, poolSize: 1 });
        try {
          const channel = `svc_listen_test_${process.pid}`;
          let heard!: (payload: string) => void;
          const received = new Promise<string>((resolve) => (heard = resolve));
          await database.listen(channel, heard);
          await sql`select pg_notify(${channel}, 'hello')`.execute(database.db);
          expect(await received).to.equal('hello');
          const { rows } = await sql<{ query: string }>`select query from pg_stat_activity where application_name = ${applicationName}`.execute(database.db);
          expect(rows.map((row) => row.query)).to.deep.equal([`listen "${channel}"`]);
        } finally {
          await database.close();
        }
      });
    });
  }
});

