import { createHash } from 'node:crypto';
import type pg from 'pg';

/**
 * The statements of fixed text that every turn runs, by name. On a PostgreSQL server a named
 * statement is parsed once per connection and, once the server settles on a generic plan,
 * no longer planned: the turn's statements are the largest the service sends, and planning
 * them was most of their cost to the server.
 *
 * A name is made from the statement's text, so a server process that holds a statement of that
 * name holds that very text, whoever prepared it there: behind a pooler that shares server
 * processes between clients (PgBouncer), another version of the service, or another program
 * importing the repositories in another order, never gets a statement of the same name and
 * other text.
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
  if (!names.has(text)) names.set(text, `svc_hot_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`);
  return text;
}

/** Whether a pool's connections still run the hot statements prepared: shared by all of them. */
export type HotStatementMode = { prepare: boolean };

/**
 * Runs the hot statements of a pooled connection as named prepared statements (every other
 * statement as before). Kysely gives `pg` the statement's text only, so the name is looked up
 * by text here, where the connection is made. A pool whose server processes are shared with
 * other clients (PgBouncer's transaction pooling without its prepared statement support,
 * before 1.21 or with `max_prepared_statements = 0`; pglite-socket) fails a named statement
 * before running it: the statement then runs unnamed, and so does every later one of every
 * connection of the pool (`mode`), since what fails once on such a pool fails again, on its
 * next connection too.
 */
export function prepareHotStatements(client: pg.PoolClient, mode: HotStatementMode): void {
  const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
  (client as { query: unknown }).query = (...args: unknown[]) => {
    const [text, values] = args;
    const name = mode.prepare && typeof text === 'string' && args.length === 2 ? names.get(text) : undefined;
    if (name === undefined) return query(...args);
    return query({ name, text, values }).catch((error: unknown) => {
      if (!SHARED_BACKEND_ERRORS.has((error as { code?: unknown } | null)?.code as string)) throw error;
      mode.prepare = false;
      return query(text, values);
    });
  };
}
