import { resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { vector as vectorExtension } from '@electric-sql/pglite-pgvector';
import { Kysely } from 'kysely';
import pg from 'pg';
import { registerTypes } from 'pgvector/pg';
import { AutoAnalyze } from './auto-analyze.js';
import { withConnectionWait } from './connection-wait.js';
import { lockDataDir } from './data-dir-lock.js';
import { listenOnServer, type StopListening } from './notification-listener.js';
import { PGliteDialect } from './pglite-dialect.js';
import { initdbInChildProcess, needsInitdb } from './pglite-initdb.js';
import { ServerDialect } from './server-dialect.js';
import { prepareHotStatements, type HotStatementMode } from './prepared-statements.js';
import type { DatabaseSchema } from './database-schema.js';

/** An open database: the Kysely instance and what it runs on. */
export type Database = {
  db: Kysely<DatabaseSchema>;
  /** `pg`: a PostgreSQL server through a connection pool; `pglite`: the embedded database. */
  kind: 'pg' | 'pglite';
  /** Opened with vector support (PGlite loads pgvector; `pg` clients get its type parsers). */
  hasVector: boolean;
  /** The service's own autovacuum analyze: told of writes to the tables whose plans depend on statistics. */
  autoAnalyze: AutoAnalyze;
  /** Calls `onPayload` with each notification on `channel` (`NOTIFY`/`pg_notify`); resolves once listening, with the way to stop. */
  listen(channel: string, onPayload: (payload: string) => void): Promise<StopListening>;
  close(): Promise<void>;
};

/** How to open the database: a server `url`, or else the embedded one in `dataDir`. */
export type CreateDatabaseOptions = {
  /** `postgres://<user>:<password>@<host>:<port>/<database>`; empty or absent → PGlite. */
  url?: string;
  /** Folder of the embedded database, or `memory://` for one that lives in memory. */
  dataDir: string;
  /** Load pgvector (long-term memory). */
  vector: boolean;
  /**
   * A `memory://` database starts from this dump of another one (PGlite's `dumpDataDir()`)
   * instead of running initdb: about 1 s instead of 5 (tests). Ignored for data folders.
   */
  pgliteTemplate?: Blob;
  /**
   * Where the connections that `listen` go, when not to `url`: straight to the server when `url`
   * goes through a transaction pooler (PgBouncer), which loses LISTEN. The same database as `url`.
   */
  listenUrl?: string;
  /** Connections in the `pg` pool (default 10). */
  poolSize?: number;
  /** The embedded database's shared buffers in MB (`database.embedded_shared_buffers_mb`); PGlite's own default is 128. */
  sharedBuffersMb?: number;
  /**
   * Told about errors of idle pooled connections (the server restarted, the network
   * dropped); the pool replaces such a connection on its own. Default: ignored.
   */
  onIdleError?: (error: Error) => void;
  /** Told how long, in ms, each query waited for a connection (the pool's, PGlite's one backend). Default: not measured. */
  onConnectionWait?: (durationMs: number) => void;
  /** Told about errors of background work on the database (its ANALYZE). Default: ignored. */
  onMaintenanceError?: (error: Error) => void;
};

/** Connections in the PostgreSQL pool unless configured (`database.pool_size`). */
export const DEFAULT_POOL_SIZE = 10;
/** The embedded database's shared buffers unless configured (`database.embedded_shared_buffers_mb`); see docs/deployment.md. */
export const DEFAULT_SHARED_BUFFERS_MB = 16;
const SCHEMES = new Set(['postgres:', 'postgresql:']);
const EXPECTED_FORM = '<scheme>://<user>:<password>@<host>:<port>/<database> with scheme postgres or postgresql';

/** Opens PostgreSQL through `pg` when `url` is set, otherwise the embedded PGlite in `dataDir`. */
export async function createDatabase(options: CreateDatabaseOptions): Promise<Database> {
  const url = options.url?.trim();
  return url ? openServer(url, options) : openEmbedded(options);
}

function openServer(url: string, options: CreateDatabaseOptions): Database {
  assertConnectionString(url);
  const listenUrl = options.listenUrl?.trim() || url;
  assertConnectionString(listenUrl);
  const pool = new pg.Pool({
    connectionString: url,
    max: options.poolSize ?? DEFAULT_POOL_SIZE,
    // Awaited by the pool before the client is handed out, unlike the 'connect' event.
    onConnect: options.vector ? prepareVectorClient : undefined,
  });
  // Without a listener an idle connection's error would crash the process.
  pool.on('error', (error) => options.onIdleError?.(error));
  const hotStatements: HotStatementMode = { prepare: true };
  // A checked-out client whose server goes away emits 'error' too (its query also rejects):
  // without this listener that, too, would crash the process.
  pool.on('connect', (client) => {
    client.on('error', (error) => options.onIdleError?.(error));
    prepareHotStatements(client, hotStatements);
  });
  const db = new Kysely<DatabaseSchema>({ dialect: withConnectionWait(new ServerDialect({ pool }), options.onConnectionWait) });
  const listeners = new Set<StopListening>();
  // A server's autovacuum may be off, or come round only after its naptime: the memories' statistics stay fresh either way.
  const autoAnalyze = new AutoAnalyze(db, options.onMaintenanceError ?? (() => {}));
  return {
    db,
    kind: 'pg',
    hasVector: options.vector,
    autoAnalyze,
    async listen(channel, onPayload) {
      const stop = await listenOnServer(listenUrl, channel, onPayload, (error) => options.onIdleError?.(error));
      listeners.add(stop);
      return async () => {
        listeners.delete(stop);
        await stop();
      };
    },
    async close() {
      await Promise.all([...listeners].map((stop) => stop()));
      await autoAnalyze.close();
      await db.destroy();
    },
  };
}

/**
 * pgvector ≥ 0.8 keeps scanning the HNSW index until enough rows pass the `user_id`
 * filter; without it a user with few memories among many can get none back. Set before
 * the extension is loaded it waits as a placeholder; versions without it drop it with a
 * warning.
 */
const ITERATIVE_SCAN = "set_config('hnsw.iterative_scan', 'strict_order', false)";

/**
 * Turns on iterative index scans and registers pgvector's type parsers. A database that
 * has not been migrated yet has no `vector` type: the client then goes without the
 * parsers (the repositories only write vectors, in their text form).
 */
async function prepareVectorClient(client: pg.ClientBase): Promise<void> {
  const { rows } = await client.query<{ present: boolean }>(
    `select ${ITERATIVE_SCAN}, exists (select 1 from pg_type where typname = 'vector') as present`,
  );
  if (rows[0]?.present) await registerTypes(client);
}

async function openEmbedded(options: CreateDatabaseOptions): Promise<Database> {
  const dataDir = isUrlLike(options.dataDir) ? options.dataDir : resolve(options.dataDir);
  // One process per data folder, taken before PGlite touches it.
  const unlock = isUrlLike(dataDir) ? async () => {} : await lockDataDir(dataDir);
  let pglite: PGlite;
  try {
    if (!isUrlLike(dataDir) && needsInitdb(dataDir)) await initdbInChildProcess(dataDir);
    pglite = await PGlite.create(dataDir, {
      startParams: embeddedStartParams(options.sharedBuffersMb ?? DEFAULT_SHARED_BUFFERS_MB),
      ...(options.vector ? { extensions: { vector: vectorExtension } } : {}),
      // PGlite refuses to load a dump over an existing data folder.
      ...(options.pgliteTemplate && dataDir.startsWith('memory://') ? { loadDataDir: options.pgliteTemplate } : {}),
    });
    if (options.vector) await pglite.query(`select ${ITERATIVE_SCAN}`);
  } catch (error) {
    await unlock();
    throw error;
  }
  const db = new Kysely<DatabaseSchema>({ dialect: withConnectionWait(new PGliteDialect(pglite), options.onConnectionWait) });
  const autoAnalyze = new AutoAnalyze(db, options.onMaintenanceError ?? (() => {}));
  return {
    db,
    kind: 'pglite',
    hasVector: options.vector,
    autoAnalyze,
    listen: (channel, onPayload) => pglite.listen(channel, onPayload),
    async close() {
      await autoAnalyze.close();
      await db.destroy();
      // Kysely closes PGlite only when it ran a query through it.
      if (!pglite.closed) await pglite.close();
      await unlock();
    },
  };
}

/**
 * PostgreSQL settings of the embedded database, sized for its memory at rest: the shared
 * buffers (configured) are touched at start, so PGlite's 128 MB default would be resident
 * from the first second; and the per-connection shared structures (PGPROC, lock tables)
 * are sized for 100 connections where PGlite runs one backend (18 MB less at 8).
 */
const EMBEDDED_SETTINGS = ['-c', 'max_connections=8'];

/** PGlite's start parameters with the service's settings (see EMBEDDED_SETTINGS). */
export function embeddedStartParams(sharedBuffersMb: number): string[] {
  return [...PGlite.defaultStartParams, ...EMBEDDED_SETTINGS, '-c', `shared_buffers=${sharedBuffersMb}MB`];
}

function isUrlLike(dataDir: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(dataDir);
}

/** Throws an Error naming what is wrong with `url`, with any password masked. */
function assertConnectionString(url: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalidUrl(url, 'it cannot be parsed as a URL');
  }
  if (!SCHEMES.has(parsed.protocol)) {
    throw invalidUrl(url, `the scheme "${parsed.protocol.replace(/:$/, '')}" is not postgres or postgresql`);
  }
  if (!parsed.hostname) throw invalidUrl(url, 'it names no host');
  if (parsed.pathname.replace(/^\//, '') === '') throw invalidUrl(url, 'it names no database');
}

function invalidUrl(url: string, problem: string): Error {
  return new Error(`Invalid database URL "${redactPassword(url)}": ${problem}. Expected ${EXPECTED_FORM}.`);
}

/** The database `options` open, for an operator's message: the server's URL without its password, or the embedded database's folder. */
export function describeDatabase(options: Pick<CreateDatabaseOptions, 'url' | 'dataDir'>): string {
  return options.url ? `the database at ${redactPassword(options.url)}` : `the embedded PGlite database in ${options.dataDir}`;
}

/** The connection string with the password (whatever sits between the user's ':' and the last '@') masked. */
export function redactPassword(url: string): string {
  const schemeEnd = url.indexOf('://');
  const userStart = schemeEnd < 0 ? 0 : schemeEnd + 3;
  const at = url.lastIndexOf('@');
  const colon = url.indexOf(':', userStart);
  if (at < userStart || colon < 0 || colon > at) return url;
  return `${url.slice(0, colon + 1)}***${url.slice(at)}`;
}
