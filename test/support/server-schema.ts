import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** A schema of its own on the PostgreSQL server, so a test's tables start empty. */
export type ServerSchema = { url: string; drop(): Promise<void> };

/** Creates a fresh schema on the server at `baseUrl` and a URL whose connections work in it. */
export async function createServerSchema(baseUrl: string, prefix = 'e2e'): Promise<ServerSchema> {
  const schema = `${prefix}_${randomBytes(6).toString('hex')}`;
  await adminQuery(baseUrl, `create schema ${schema}`);
  const url = new URL(baseUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return { url: url.toString(), drop: () => adminQuery(baseUrl, `drop schema if exists ${schema} cascade`) };
}

async function adminQuery(url: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}
