import { expect } from 'chai';
import { Migrator, sql } from 'kysely';
import { coreMigrations } from '../../storage/migrations.js';
import { createResponseRepository, MEMORY_MIGRATION_TABLE, migrateToLatest } from '../../storage/index.js';
import type { MigrateOptions } from '../../storage/index.js';
import { databaseTargets } from '../support/databases.js';
import type { TestDatabase } from '../support/databases.js';

const CORE_NAMES = [
  '0001_conversations_and_sessions',
  '0002_oauth',
  '0003_webhooks',
  '0004_session_leases',
  '0005_session_transitions',
  '0006_webhook_claims',
  '0007_webhook_owners',
  '0008_session_lease_handover',
  '0009_responses',
  '0010_session_metadata',
  '0011_background_responses',
  '0012_session_usage',
  '0013_session_calls',
  '0014_responses_inline',
  '0015_responses_as_text',
  '0016_idempotency_keys',
  '0017_durable_turns',
  '0018_call_trace_ids',
  '0019_user_token_usage',
];
const CORE = CORE_NAMES.map((name) => `core/${name}`);
const MEMORY = ['memory/0001_memories', 'memory/0002_memory_embedder'];

for (const target of databaseTargets()) {
  describe(`migrateToLatest on ${target.name}`, () => {
    let database: TestDatabase;
    const options: MigrateOptions = { vector: target.hasVector, embeddingDimensions: 3 };
    const expected = target.hasVector ? [...CORE, ...MEMORY] : CORE;

    before(async () => {
      database = await target.open();
    });
    after(async () => {
      await database?.close();
    });

    // Runs first, while the database is still empty.
    it('applies each migration exactly once when two migrators start at the same time', async () => {
      const peer = await database.openPeer();
      const [first, second] = await Promise.all([migrateToLatest(database, options), migrateToLatest(peer, options)]);

      expect([...first.applied, ...second.applied].sort()).to.deep.equal([...expected].sort());
      const { rows } = await sql<{ name: string }>`select name from kysely_migration`.execute(database.db);
      expect(rows.map((row) => row.name)).to.deep.equal(CORE_NAMES);
    });

    it('applies nothing when the schema is already current', async () => {
      await migrateToLatest(database, options);
      const again = await migrateToLatest(database, options);
      expect(again.applied).to.deep.equal([]);
    });

    it('creates conversations with exactly the specification columns when migrated', async () => {
      await migrateToLatest(database, options);
      const { rows } = await sql<{
        column_name: string;
        data_type: string;
        character_maximum_length: number | null;
        is_nullable: string;
        is_identity: string;
        has_default: boolean;
      }>`
        select column_name, data_type, character_maximum_length, is_nullable, is_identity,
               (column_default is not null) as has_default
        from information_schema.columns
        where table_schema = current_schema() and table_name = 'conversations'
        order by ordinal_position`.execute(database.db);

      expect(rows).to.deep.equal([
        { column_name: 'id', data_type: 'integer', character_maximum_length: null, is_nullable: 'NO', is_identity: 'YES', has_default: false },
        { column_name: 'user_id', data_type: 'character varying', character_maximum_length: 255, is_nullable: 'NO', is_identity: 'NO', has_default: false },
        { column_name: 'session_id', data_type: 'character varying', character_maximum_length: 255, is_nullable: 'NO', is_identity: 'NO', has_default: false },
        { column_name: 'role', data_type: 'character varying', character_maximum_length: 50, is_nullable: 'NO', is_identity: 'NO', has_default: false },
        { column_name: 'message', data_type: 'text', character_maximum_length: null, is_nullable: 'NO', is_identity: 'NO', has_default: false },
        { column_name: 'created_at', data_type: 'timestamp with time zone', character_maximum_length: null, is_nullable: 'NO', is_identity: 'NO', has_default: true },
      ]);
    });

    it('makes id the primary key and indexes (session_id, id) when migrated', async () => {
      await migrateToLatest(database, options);
      const { rows } = await sql<{ indexdef: string }>`
        select indexdef from pg_indexes where schemaname = current_schema() and tablename = 'conversations'`.execute(database.db);
      const definitions = rows.map((row) => row.indexdef);
      expect(definitions.some((definition) => /UNIQUE INDEX conversations_pkey .*\(id\)/.test(definition))).to.equal(true);
      expect(definitions.some((definition) => /conversations_session_id_id_idx .*\(session_id, id\)/.test(definition))).to.equal(true);
    });

    it('creates sessions with its bookkeeping columns when migrated', async () => {
      await migrateToLatest(database, options);
      const { rows } = await sql<{ column_name: string; is_nullable: string }>`
        select column_name, is_nullable from information_schema.columns
        where table_schema = current_schema() and table_name = 'sessions'
        order by ordinal_position`.execute(database.db);
      expect(rows.map((row) => `${row.column_name}${row.is_nullable === 'YES' ? '?' : ''}`)).to.deep.equal([
        'session_id',
        'user_id',
        'created_at',
        'last_active',
        'history_hash?',
        'snapshot?',
        'current_state?',
        'transitions',
        'deleted_at?',
        'metadata?',
        'usage',
      ]);
    });

    it('keeps every stored response when its body and input become text, with its status in a column of its own', async () => {
      const upgraded = await target.open({ vector: false });
      try {
        // Kept beside the tables, as migrateToLatest keeps them (the server's tests run in a schema of their own).
        const { rows: schemas } = await sql<{ schema: string }>`select current_schema() as schema`.execute(upgraded.db);
        const migrator = new Migrator({ db: upgraded.db, provider: { getMigrations: async () => coreMigrations }, migrationTableSchema: schemas[0]!.schema });
        expect((await migrator.migrateTo('0014_responses_inline')).error).to.equal(undefined);
        const input = [{ id: 'msg_1', type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi "there"' }] }];
        const bodies = {
          resp_done: { created_at: 1, status: 'completed', model: 'm', output: [{ type: 'message', content: [{ type: 'output_text', text: 'Echo: hi' }] }] },
          resp_failed: { created_at: 2, status: 'failed', model: 'm', output: [], error: { code: 'server_error', message: 'LLM down' } },
        };
        for (const [id, body] of Object.entries(bodies)) {
          await sql`insert into responses (id, user_id, session_id, history_hash, body, input)
            values (${id}, 'alice', 's1', 'h', ${JSON.stringify(body)}::jsonb, ${JSON.stringify(input)}::jsonb)`.execute(upgraded.db);
        }
        await migrateToLatest(upgraded, { vector: false, embeddingDimensions: 3 });
        const { rows } = await sql<{ id: string; status: string; body: string }>`select id, status, body from responses order by id`.execute(upgraded.db);
        expect(rows.map((row) => [row.id, row.status, JSON.parse(row.body)])).to.deep.equal([
          ['resp_done', 'completed', bodies.resp_done],
          ['resp_failed', 'failed', bodies.resp_failed],
        ]);
        const responses = createResponseRepository(upgraded.db);
        for (const [id, body] of Object.entries(bodies)) {
          const record = await responses.get(id);
          expect(record?.body).to.deep.include({ id, ...body });
          expect(record?.input).to.deep.equal(input);
        }
        expect(await responses.endOf('resp_failed')).to.deep.include({ status: 'failed' });
      } finally {
        await upgraded.close();
      }
    });

    if (target.hasVector) {
      it('creates memories with an HNSW cosine index when vector is on', async () => {
        await migrateToLatest(database, options);
        const { rows } = await sql<{ indexdef: string }>`
          select indexdef from pg_indexes where schemaname = current_schema() and tablename = 'memories'`.execute(database.db);
        const definitions = rows.map((row) => row.indexdef);
        expect(definitions.some((definition) => /USING hnsw \(embedding vector_cosine_ops\)/.test(definition))).to.equal(true);
        expect(definitions.some((definition) => /memories_user_id_idx .*\(user_id\)/.test(definition))).to.equal(true);
        expect(definitions.some((definition) => /memories_session_id_idx .*\(session_id\)/.test(definition))).to.equal(true);
        const { rows: recorded } = await sql<{ name: string }>`select name from ${sql.table(MEMORY_MIGRATION_TABLE)}`.execute(
          database.db,
        );
        expect(recorded.map((row) => `memory/${row.name}`)).to.deep.equal(MEMORY);
      });

      it('rejects a start when the configured embedding dimensions differ from the table', async () => {
        await migrateToLatest(database, options);
        let failure: unknown;
        await migrateToLatest(database, { vector: true, embeddingDimensions: 4 }).catch((error: unknown) => {
          failure = error;
        });
        expect(failure).to.be.instanceOf(Error);
        expect((failure as Error).message).to.match(/vector\(3\).*dimensions are 4/);
      });

      it('keeps working when long-term memory is switched off after it was on', async () => {
        await migrateToLatest(database, options);
        const summary = await migrateToLatest(database, { vector: false, embeddingDimensions: 3 });
        expect(summary.applied).to.deep.equal([]);
      });
    }

    it('rejects embedding dimensions that the HNSW index cannot take when vector is on', async () => {
      let failure: unknown;
      await migrateToLatest(database, { vector: true, embeddingDimensions: 4096 }).catch((error: unknown) => {
        failure = error;
      });
      expect((failure as Error).message).to.match(/from 1 to 2000/);
    });
  });
}

// PGlite without pgvector loaded, in process and behind the wire protocol (a server without the
// extension: the PostgreSQL server of the tests has it).
for (const target of databaseTargets().filter((each) => each.backend !== 'postgres')) {
  describe(`migrateToLatest where pgvector is unavailable (${target.backend})`, () => {
    let database: TestDatabase;

    before(async () => {
      database = await target.open({ vector: false });
    });
    after(async () => {
      await database?.close();
    });

    it('explains that the vector extension is missing when long-term memory is on', async () => {
      let failure: unknown;
      await migrateToLatest(database, { vector: true, embeddingDimensions: 3 }).catch((error: unknown) => {
        failure = error;
      });
      expect(failure).to.be.instanceOf(Error);
      expect((failure as Error).message).to.match(/no "vector" extension.* available/);
      expect((failure as Error).message).to.match(/long-term memory/);
      if (target.backend === 'pglite-socket') expect((failure as Error).message).to.match(/PostgreSQL server \(version \d+/);
    });

    it('creates no table when the vector extension is missing', async () => {
      await migrateToLatest(database, { vector: true, embeddingDimensions: 3 }).catch(() => undefined);
      const { rows } = await sql<{ count: number }>`
        select count(*)::int as count from information_schema.tables where table_schema = current_schema()`.execute(database.db);
      expect(rows[0]?.count).to.equal(0);
    });
  });
}

for (const target of databaseTargets()) {
  describe(`migrateToLatest when a migration fails (${target.backend})`, () => {
    let database: TestDatabase;

    before(async () => {
      database = await target.open({ vector: false });
      // 0002 keeps this table, which it would have created, and fails to index its expires_at.
      await sql`create table oauth_states (id int)`.execute(database.db);
    });
    after(async () => {
      await database?.close();
    });

    it('names the migration and keeps none of the run', async () => {
      let failure: unknown;
      await migrateToLatest(database, { vector: false, embeddingDimensions: 3 }).catch((error: unknown) => {
        failure = error;
      });
      expect((failure as Error).message).to.match(/^Database migration failed in migration core\/0002_oauth: /);
      const { rows } = await sql<{ applied: number; conversations: string | null }>`
        select (select count(*)::int from kysely_migration) as applied, to_regclass('conversations')::text as conversations`.execute(database.db);
      expect(rows[0]).to.deep.equal({ applied: 0, conversations: null });
    });
  });
}
