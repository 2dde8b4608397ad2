import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { createDatabase } from '../../storage/index.js';
import type { Database } from '../../storage/index.js';
import { createServerSchema } from './server-schema.js';

/** An open test database; `close()` also removes what the target set up for it. */
export type TestDatabase = Database & {
  /** Another Database onto the same data: a second pool, or (PGlite, one connection) the same instance. */
  openPeer(): Promise<Database>;
};

/** A database the storage tests run against. */
export type DatabaseTarget = {
  name: string;
  backend: 'pglite' | 'pglite-socket' | 'postgres';
  /** Opened with pgvector by default. */
  hasVector: boolean;
  /** A fresh, empty database (a new PGlite, or a new schema on the server). */
  open(options?: { vector?: boolean }): Promise<TestDatabase>;
};

const POOL_SIZE = 4;

/** One initdb per test process and flavour; every later PGlite starts from its dump. */
const templates = new Map<boolean, Promise<Blob>>();

/** A dump of a fresh, empty PGlite data folder (with or without pgvector loaded). */
export function pgliteTemplate(withVector: boolean): Promise<Blob> {
  let template = templates.get(withVector);
  if (!template) {
    template = (async () => {
      const pglite = await PGlite.create('memory://', withVector ? { extensions: { vector } } : {});
      try {
        return await pglite.dumpDataDir('none');
      } finally {
        await pglite.close();
      }
    })();
    templates.set(withVector, template);
  }
  return template;
}

/** A fresh PGlite served over the PostgreSQL wire protocol: what the `pg` driver (DB_URL) sees as a server. */
export async function servePgliteOverSocket(options: { vector?: boolean } = {}): Promise<{ url: string; close(): Promise<void> }> {
  const pglite = await PGlite.create('memory://', options.vector ? { extensions: { vector } } : {});
  const server = new PGLiteSocketServer({ db: pglite, host: '127.0.0.1', port: 0, maxConnections: 40 });
  await server.start();
  return {
    url: `postgres://postgres:postgres@${server.getServerConn()}/postgres`,
    close: async () => {
      await server.stop();
      await pglite.close();
    },
  };
}

/** PGlite in memory and PGlite over pglite-socket always; the PostgreSQL server when TEST_DATABASE_URL is set. */
export function databaseTargets(): DatabaseTarget[] {
  const targets: DatabaseTarget[] = [
    { name: 'PGlite (memory://, pgvector)', backend: 'pglite', hasVector: true, open: openPglite },
    { name: 'PGlite over pglite-socket (pg driver, pgvector)', backend: 'pglite-socket', hasVector: true, open: openPgliteSocket },
  ];
  const serverUrl = process.env.TEST_DATABASE_URL;
  if (serverUrl) {
    targets.push({
      name: 'PostgreSQL server (TEST_DATABASE_URL, pgvector)',
      backend: 'postgres',
      hasVector: true,
      open: (options) => openServerSchema(serverUrl, options),
    });
  }
  return targets;
}

async function openPglite(options: { vector?: boolean } = {}): Promise<TestDatabase> {
  const withVector = options.vector ?? true;
  const database = await createDatabase({ dataDir: 'memory://', vector: withVector, pgliteTemplate: await pgliteTemplate(withVector) });
  return { ...database, openPeer: async () => ({ ...database, close: async () => {} }) };
}

async function openPgliteSocket(options: { vector?: boolean } = {}): Promise<TestDatabase> {
  const withVector = options.vector ?? true;
  const pglite = await PGlite.create('memory://', {
    ...(withVector ? { extensions: { vector } } : {}),
    loadDataDir: await pgliteTemplate(withVector),
  });
  // The server multiplexes its clients onto PGlite's one connection; it refuses clients past the limit.
  const server = new PGLiteSocketServer({ db: pglite, host: '127.0.0.1', port: 0, maxConnections: 4 * POOL_SIZE });
  await server.start();
  const url = `postgres://postgres:secret@${server.getServerConn()}/postgres`;
  return withCleanup(url, withVector, async () => {
    await server.stop();
    await pglite.close();
  });
}

async function openServerSchema(baseUrl: string, options: { vector?: boolean } = {}): Promise<TestDatabase> {
  const withVector = options.vector ?? true;
  const schema = await createServerSchema(baseUrl, 'storage_test', { vector: withVector });
  return withCleanup(schema.url, withVector, schema.drop);
}

async function withCleanup(url: string, withVector: boolean, cleanup: () => Promise<void>): Promise<TestDatabase> {
  const open = () => createDatabase({ url, dataDir: 'unused', vector: withVector, poolSize: POOL_SIZE });
  const database = await open();
  const peers: Database[] = [];
  return {
    ...database,
    async openPeer() {
      const peer = await open();
      peers.push(peer);
      return peer;
    },
    async close() {
      await Promise.all([database, ...peers].map((each) => each.close()));
      await cleanup();
    },
  };
}
