import pg from 'pg';

/** A database created for one bench run on a PostgreSQL server, dropped afterwards. */
export type ScratchDatabase = { url: string; name: string; drop: () => Promise<void> };

/**
 * Creates an empty database next to the one `serverUrl` names, so the service migrates a
 * fresh schema and the run leaves nothing behind; throws when the server is not reachable.
 */
export async function createScratchDatabase(serverUrl: string): Promise<ScratchDatabase> {
  const name = `svc_bench_${Date.now()}_${process.pid}`;
  await withClient(serverUrl, (client) => client.query(`create database "${name}"`));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: () => withClient(serverUrl, (client) => client.query(`drop database if exists "${name}" with (force)`)).then(() => undefined),
  };
}

async function withClient<T>(url: string, run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}
