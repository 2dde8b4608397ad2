import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sql } from 'kysely';
import { createConversationRepository, createSessionRepository, migrateToLatest } from '../../storage/index.js';
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
      it('runs them unnamed on a connection whose server process already holds statements of those names (a process shared between clients)', async () => {
        const peer = await database.openPeer();
        try {
          await peer.db.connection().execute(async (connection) => {
            // What another client of a shared server process (PgBouncer, pglite-socket) leaves behind.
            await sql`deallocate all`.execute(connection);
            for (const name of ['svc_hot_1', 'svc_hot_2']) await sql.raw(`prepare ${name} as select 1`).execute(connection);
            const conversations = createConversationRepository(connection);
            const sessions = createSessionRepository(connection);
            const sessionId = randomUUID();
            await sessions.claim(sessionId, 'user-a');
            for (const turn of [1, 2]) {
              await conversations.append([{ userId: 'user-a', sessionId, role: 'user', message: `question ${turn}` }]);
              await sessions.completeTurn(sessionId, [{ userId: 'user-a', sessionId, role: 'assistant', message: `answer ${turn}` }], { ...progress, transitions: turn });
            }
            expect((await conversations.recent(sessionId, 10)).map((record) => record.message)).to.deep.equal(['question 1', 'answer 1', 'question 2', 'answer 2']);
            expect(await sessions.get(sessionId)).to.include({ transitions: 2 });
            const { rows } = await sql<{ statement: string }>`select statement from pg_prepared_statements where name like 'svc_hot_%'`.execute(connection);
            expect(rows.map((row) => row.statement.trim())).to.deep.equal(['prepare svc_hot_1 as select 1', 'prepare svc_hot_2 as select 1']);
          });
        } finally {
          await peer.close();
        }
      });
    }
  });
}
