/**
 * The floor of the service's start-up on each database: the least a process of the same
 * stack does before it can answer. `start-floor.ts --port N --db-url URL`: Express 5 and a
 * `pg` pool that has connected (one query answered); `start-floor.ts --port N --data-dir DIR
 * --start-params JSON`: Express 5 and PGlite opened on the folder (created there when new, as
 * PGlite does by itself) with the service's start parameters (`embeddedStartParams`, given by
 * the bench: the module that makes them loads the service's whole storage layer, 0.3 s here)
 * and one query answered. Either then listens and answers `GET /health`; the bench times it
 * from the spawn as it times the service. Each database's modules are loaded only in its case.
 */
import { parseArgs } from 'node:util';
import express from 'express';

const { values } = parseArgs({ options: { port: { type: 'string' }, host: { type: 'string', default: '127.0.0.1' }, 'db-url': { type: 'string' }, 'data-dir': { type: 'string' }, 'start-params': { type: 'string' } } });
if (!values.port || !(values['db-url'] || (values['data-dir'] && values['start-params']))) {
  throw new Error('usage: start-floor.ts --port N (--db-url URL | --data-dir DIR --start-params JSON)');
}

const close = values['db-url'] ? await connectServer(values['db-url']) : await openEmbedded(values['data-dir']!, JSON.parse(values['start-params']!) as string[]);
const app = express();
app.get('/health', (_req, res) => {
  res.json({ status: 'ok' });
});
const server = app.listen(Number(values.port), values.host);
const stop = () => {
  server.close();
  server.closeAllConnections();
  void close().finally(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);

/** A `pg` pool (of 10 connections, as the service's), one of its connections made and a query answered. */
async function connectServer(url: string): Promise<() => Promise<void>> {
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  await pool.query('select 1');
  return () => pool.end();
}

/** PGlite opened on the folder with the service's start parameters (no vector extension: the service loads it only with long-term memory on). */
async function openEmbedded(dataDir: string, startParams: string[]): Promise<() => Promise<void>> {
  const { PGlite } = await import('@electric-sql/pglite');
  const pglite = await PGlite.create(dataDir, { startParams });
  await pglite.query('select 1');
  return () => pglite.close();
}
