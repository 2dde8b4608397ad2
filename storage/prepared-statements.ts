import type pg from 'pg';

/**
 * The statements of fixed text that every turn runs, by name. On a PostgreSQL server a named
 * statement is parsed once per connection and, once the server settles on a generic plan,
 * no longer planned: the turn's statements are the largest the service sends, and planning
 * them was most of their cost to the server.
 */
const names = new Map<string, string>();

/** SQLSTATEs of a named statement that the connection's server process does not hold as `pg` believes it does. */
const SHARED_BACKEND_ERRORS = new Set([
  '42P05', // duplicate_prepared_statement: another client of the same server process prepared it
  '26000', // invalid_sql_statement_name: this client prepared it on another server process
]);

/** The name of the hot statement `text`, if it is one. */
export function hotStatementName(text: string): string | undefined {
  return names.get(text);
}

/** Marks `text` as a hot statement (run prepared on a server connection); returns it unchanged. */
export function hotStatement(text: string): string {
  if (!names.has(text)) names.set(text, `svc_hot_${names.size + 1}`);
  return text;
}

/**
 * Runs the hot statements of a pooled connection as named prepared statements (every other
 * statement as before). Kysely gives `pg` the statement's text only, so the name is looked up
 * by text here, where the connection is made. A connection whose server process is shared
 * with other clients (PgBouncer's transaction pooling without prepared statement support,
 * pglite-socket) fails a named statement before running it; it then runs the statement
 * unnamed, and every later one too.
 */
export function prepareHotStatements(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
  let prepare = true;
  (client as { query: unknown }).query = (...args: unknown[]) => {
    const [text, values] = args;
    const name = prepare && typeof text === 'string' && args.length === 2 ? names.get(text) : undefined;
    if (name === undefined) return query(...args);
    return query({ name, text, values }).catch((error: unknown) => {
      if (!SHARED_BACKEND_ERRORS.has((error as { code?: unknown } | null)?.code as string)) throw error;
      prepare = false;
      return query(text, values);
    });
  };
}
