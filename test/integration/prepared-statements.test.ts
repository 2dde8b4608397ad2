import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sql, type Kysely } from 'kysely';
import { createConversationRepository, createSessionRepository, migrateToLatest, type DatabaseSchema } from '../../storage/index.js';
import { databaseTargets } from '../support/databases.js';
import type { TestDatabase } from '../support/databases.js';

const progress = { snapshot: { status: 'active', value: 'ask_user', context: {} }, currentState: 'ask_user', transitions: 1, historyHash: 'h' };

for (const target of databaseTargets()) {
  describe(`the turn's statements on ${target.name}`, () => {
    let database: TestDatabase;

    before(async () => {
      database = await target.open();
      await migrateToLatest(database, { vector: target.hasVector, embeddingDimensions: 3 });
    });
    after(async () => {
      await database?.close();
    });

    it('run as named prepared statements, parsed once per connection and executed again on every turn', async () => {
      await database.db.connection().execute(async (connection) => {
        const conversations = createConversationRepository(connection);
        const sessions = createSessionRepository(connection);
        const sessionId = randomUUID();
        await sessions.claim(sessionId, 'user-a');
        for (const turn of [1, 2, 3]) {
          await conversations.append([{ userId: 'user-a', sessionId, role: 'user', message: `question ${turn}` }]);
          await sessions.completeTurn(sessionId, [{ userId: 'user-a', sessionId, role: 'assistant', message: `answer ${turn}` }], { ...progress, transitions: turn });
        }
        const { rows } = await sql<{ statement: string; runs: number }>`
          select statement, (generic_plans + custom_plans)::int as runs from pg_prepared_statements
          where name like 'svc_hot_%' order by statement`.execute(connection);
        expect(rows.map((row) => [row.statement.split(/\s+/)[0], row.runs])).to.deep.equal([
          ['insert', 3],
          ['with', 3],
        ]);
        expect(await sessions.get(sessionId)).to.include({ transitions: 3 });
        const stored = await conversations.recent(sessionId, 10);
        expect(stored.map((record) => record.message)).to.deep.equal(['question 1', 'answer 1', 'question 2', 'answer 2', 'question 3', 'answer 3']);
      });
    });

    it('store text of any script, empty text and nulls as they were given', async () => {
      await database.db.connection().execute(async (connection) => {
        const conversations = createConversationRepository(connection);
        const sessions = createSessionRepository(connection);
        const sessionId = randomUUID();
        await sessions.claim(sessionId, 'user-a');
        const messages = ['naïve café 😀 — 日本語', '', 'a "quoted" \\ backslash', 'x'.repeat(70_000)];
        await conversations.append([{ userId: 'user-a', sessionId, role: 'user', message: messages[0]! }]);
        const records = messages.slice(1).map((message) => ({ userId: 'user-a', sessionId, role: 'assistant', message }));
        await sessions.completeTurn(sessionId, records, { ...progress, snapshot: null, historyHash: 'ü' });
        expect((await conversations.recent(sessionId, 10)).map((record) => record.message)).to.deep.equal(messages);
        expect(await sessions.get(sessionId)).to.include({ snapshot: null, historyHash: 'ü' });
      });
    });

    // The embedded database has one connection, the service's own: nobody else prepares there.
    if (target.backend !== 'pglite') {
      it('runs them unnamed, on every connection of the pool, once a server process already held statements of those names (a process shared between clients)', async () => {
        const names = await hotStatementNames(database);
        const peer = await database.openPeer();
        try {
          const leftBehind = await peer.db.connection().execute(async (connection) => {
            // What another client of a shared server process (PgBouncer, pglite-socket) leaves behind.
            await sql`deallocate all`.execute(connection);
            for (const name of names) await sql.raw(`prepare ${name} as select 1`).execute(connection);
            await runTurns(connection, 2);
            return preparedHere(connection);
          });
          expect(leftBehind).to.deep.equal(names.map((name) => `prepare ${name} as select 1`));
          // A connection of its own (the first is held meanwhile): the pool as a whole stopped preparing.
          await peer.db.connection().execute(async (held) => {
            await sql`select 1`.execute(held);
            await peer.db.connection().execute(async (other) => {
              await runTurns(other, 1);
              expect((await preparedHere(other)).filter((statement) => !statement.endsWith('as select 1'))).to.deep.equal([]);
            });
          });
        } finally {
          await peer.close();
        }
      });
    }
  });
}

/** The names the hot statements run under, as a connection of `database` that ran a turn holds them. */
async function hotStatementNames(database: TestDatabase): Promise<string[]> {
  return database.db.connection().execute(async (connection) => {
    await runTurns(connection, 1);
    const { rows } = await sql<{ name: string }>`select name from pg_prepared_statements where name like 'svc_hot_%' order by name`.execute(connection);
    expect(rows).to.have.length(2);
    return rows.map((row) => row.name);
  });
}

/** Runs `turns` turns of a new session on `connection` and checks what they stored. */
async function runTurns(connection: Kysely<DatabaseSchema>, turns: number): Promise<void> {
  const conversations = createConversationRepository(connection);
  const sessions = createSessionRepository(connection);
  const sessionId = randomUUID();
  await sessions.claim(sessionId, 'user-a');
  const expected: string[] = [];
  for (let turn = 1; turn <= turns; turn += 1) {
    await conversations.append([{ userId: 'user-a', sessionId, role: 'user', message: `question ${turn}` }]);
    await sessions.completeTurn(sessionId, [{ userId: 'user-a', sessionId, role: 'assistant', message: `answer ${turn}` }], { ...progress, transitions: turn });
    expected.push(`question ${turn}`, `answer ${turn}`);
  }
  expect((await conversations.recent(sessionId, 10)).map((record) => record.message)).to.deep.equal(expected);
  expect(await sessions.get(sessionId)).to.include({ transitions: turns });
}

/** The hot statements' names prepared on `connection`'s server process, as the statements that prepared them. */
async function preparedHere(connection: Kysely<DatabaseSchema>): Promise<string[]> {
  const { rows } = await sql<{ statement: string }>`select statement from pg_prepared_statements where name like 'svc_hot_%' order by name`.execute(connection);
  return rows.map((row) => row.statement.trim());
}
