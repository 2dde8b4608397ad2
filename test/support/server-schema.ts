import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** A schema of its own on the PostgreSQL server, so a test's tables start empty. */
export type ServerSchema = { url: string; drop(): Promise<void> };

/**
 * Creates a fresh schema on the server at `baseUrl` and a URL whose connections work in it.
 * `public` follows it on the search path: with `vector`, pgvector is installed there, once
 * for the database (an extension exists once per database, and a test schema's drop would
 * take it along), so the memories table of every schema finds the `vector` type.
 */
export async function createServerSchema(baseUrl: string, prefix = 'e2e', options: { vector?: boolean } = {}): Promise<ServerSchema> {
  if (options.vector) await vectorInPublic(baseUrl);
  const schema = `${prefix}_${randomBytes(6).toString('hex')}`;
  await adminQuery(baseUrl, `create schema ${schema}`);
  const url = new URL(baseUrl);
  url.searchParams.set('options', `-c search_path=${schema},public`);
  return { url: url.toString(), drop: () => adminQuery(baseUrl, `drop schema if exists ${schema} cascade`) };
}

const vectorReady = new Map<string, Promise<void>>();

/** Installs pgvector in the database's `public` schema unless it is there; says how to get it when the server lacks it. */
function vectorInPublic(baseUrl: string): Promise<void> {
  let ready = vectorReady.get(baseUrl);
  if (!ready) {
    ready = (async () => {
      const available = await adminRows<{ present: boolean }>(baseUrl, `select exists (select 1 from pg_available_extensions where name = 'vector') as present`);
      if (!available[0]?.present) {
        throw new Error(`the PostgreSQL server at ${baseUrl} has no pgvector, which the long-term memory tests need: run ../shared/tools/install-pgvector (see the README)`);
      }
      await adminQuery(baseUrl, 'create extension if not exists vector schema public');
    })();
    vectorReady.set(baseUrl, ready);
  }
  return ready;
}

async function adminQuery(url: string, statement: string): Promise<void> {
  await adminRows(url, statement);
}

async function adminRows<Row>(url: string, statement: string): Promise<Row[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(statement)).rows as Row[];
  } finally {
    await client.end();
  }
}
