import { sql, type Kysely, type Migration } from 'kysely';

/**
 * The tables every deployment has: conversations, sessions, and the OAuth tokens and
 * pending logins (empty while OAuth is not configured). Names sort in the order
 * they run; a new migration gets the next number and existing ones never change.
 */
export const coreMigrations: Record<string, Migration> = {
  '0001_conversations_and_sessions': {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable('conversations')
        .ifNotExists()
        .addColumn('id', 'integer', (column) => column.generatedByDefaultAsIdentity().primaryKey())
        .addColumn('user_id', 'varchar(255)', (column) => column.notNull())
        .addColumn('session_id', 'varchar(255)', (column) => column.notNull())
        .addColumn('role', 'varchar(50)', (column) => column.notNull())
        .addColumn('message', 'text', (column) => column.notNull())
        .addColumn('created_at', 'timestamptz', (column) => column.notNull().defaultTo(sql`now()`))
        .execute();
      // The recent turns of a session, and its pages, are range scans of this index.
      await db.schema
        .createIndex('conversations_session_id_id_idx')
        .ifNotExists()
        .on('conversations')
        .columns(['session_id', 'id'])
        .execute();

      await db.schema
        .createTable('sessions')
        .ifNotExists()
        .addColumn('session_id', 'varchar(255)', (column) => column.primaryKey())
        .addColumn('user_id', 'varchar(255)', (column) => column.notNull())
        .addColumn('created_at', 'timestamptz', (column) => column.notNull().defaultTo(sql`now()`))
        .addColumn('last_active', 'timestamptz', (column) => column.notNull().defaultTo(sql`now()`))
        .addColumn('history_hash', 'text')
        .addColumn('snapshot', 'jsonb')
        .addColumn('current_state', 'varchar(255)')
        .addColumn('transitions', 'integer', (column) => column.notNull().defaultTo(0))
        .addColumn('deleted_at', 'timestamptz')
        .execute();
      await db.schema
        .createIndex('sessions_user_id_history_hash_idx')
        .ifNotExists()
        .on('sessions')
        .columns(['user_id', 'history_hash'])
        .execute();
      // Listing sessions, most recently active first, with or without a user filter.
      await db.schema
        .createIndex('sessions_user_id_last_active_idx')
        .ifNotExists()
        .on('sessions')
        .columns(['user_id', 'last_active'])
        .execute();
      await db.schema.createIndex('sessions_last_active_idx').ifNotExists().on('sessions').column('last_active').execute();
    },
  },
  '0002_oauth': {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable('oauth_tokens')
        .ifNotExists()
        .addColumn('user_id', 'varchar(255)', (column) => column.notNull())
        .addColumn('provider', 'varchar(64)', (column) => column.notNull())
        .addColumn('ciphertext', 'text', (column) => column.notNull())
        .addColumn('expires_at', 'timestamptz')
        .addColumn('scope', 'text')
        .addColumn('created_at', 'timestamptz', (column) => column.notNull().defaultTo(sql`now()`))
        .addColumn('updated_at', 'timestamptz', (column) => column.notNull().defaultTo(sql`now()`))
        .addPrimaryKeyConstraint('oauth_tokens_pkey', ['user_id', 'provider'])
        .execute();

      await db.schema
        .createTable('oauth_states')
        .ifNotExists()
        .addColumn('state', 'varchar(255)', (column) => column.primaryKey())
        .addColumn('user_id', 'varchar(255)', (column) => column.notNull())
        .addColumn('provider', 'varchar(64)', (column) => column.notNull())
        .addColumn('code_verifier', 'text', (column) => column.notNull())
        .addColumn('nonce', 'text')
        .addColumn('browser_binding', 'varchar(128)', (column) => column.notNull())
        .addColumn('expires_at', 'timestamptz', (column) => column.notNull())
        .addColumn('created_at', 'timestamptz', (column) => column.notNull().defaultTo(sql`now()`))
        .execute();
      // Abandoned logins are purged by expiry.
      await db.schema.createIndex('oauth_states_expires_at_idx').ifNotExists().on('oauth_states').column('expires_at').execute();
    },
  },
  '0003_webhooks': {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable('webhook_subscriptions')
        .ifNotExists()
        .addColumn('id', 'varchar(64)', (column) => column.primaryKey())
        .addColumn('url', 'text', (column) => column.notNull())
        .addColumn('events', 'jsonb', (column) => column.notNull())
        // Kept in clear: the HMAC needs it at every delivery.
        .addColumn('secret', 'text', (column) => column.notNull())
        .addColumn('active', 'boolean', (column) => column.notNull().defaultTo(true))
        .addColumn('created_at', 'timestamptz', (column) => column.notNull().defaultTo(sql`now()`))
        .addColumn('updated_at', 'timestamptz', (column) => column.notNull().defaultTo(sql`now()`))
        .execute();

      // The durable outbox: one row per (event, subscription); payload holds the exact bytes sent.
      await db.schema
        .createTable('webhook_deliveries')
        .ifNotExists()
        .addColumn('id', 'bigint', (column) => column.generatedByDefaultAsIdentity().primaryKey())
        .addColumn('delivery_id', 'varchar(64)', (column) => column.notNull().unique())
        .addColumn('subscription_id', 'varchar(64)', (column) => column.notNull().references('webhook_subscriptions.id').onDelete('cascade'))
        .addColumn('agent_id', 'varchar(255)')
        .addColumn('event', 'varchar(64)', (column) => column.notNull())
        .addColumn('payload', 'text', (column) => column.notNull())
        .addColumn('status', 'varchar(16)', (column) => column.notNull().defaultTo('pending'))
        .addColumn('attempts', 'integer', (column) => column.notNull().defaultTo(0))
        .addColumn('next_attempt_at', 'timestamptz', (column) => column.notNull().defaultTo(sql`now()`))
        .addColumn('last_status', 'integer')
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'timestamptz', (column) => column.notNull().defaultTo(sql`now()`))
        .addColumn('delivered_at', 'timestamptz')
        .execute();
      // The delivery loop looks for due pending rows; the delivery log pages one subscription.
      await db.schema
        .createIndex('webhook_deliveries_status_next_attempt_at_idx')
        .ifNotExists()
        .on('webhook_deliveries')
        .columns(['status', 'next_attempt_at'])
        .execute();
      await db.schema
        .createIndex('webhook_deliveries_subscription_id_id_idx')
        .ifNotExists()
        .on('webhook_deliveries')
        .columns(['subscription_id', 'id'])
        .execute();
    },
  },
  '0004_session_leases': {
    async up(db: Kysely<any>) {
      // One row per session ever leased: who may run its turns until when. `generation` counts
      // acquisitions, so a process can tell that nobody else held the session since its last turn.
      await db.schema
        .createTable('session_leases')
        .ifNotExists()
        .addColumn('session_id', 'varchar(255)', (column) => column.primaryKey())
        .addColumn('holder', 'varchar(128)', (column) => column.notNull())
        .addColumn('generation', 'bigint', (column) => column.notNull().defaultTo(1))
        .addColumn('expires_at', 'timestamptz', (column) => column.notNull())
        .execute();
    },
  },
  '0005_session_transitions': {
    async up(db: Kysely<any>) {
      // Every transition of every session, in the order taken: a session's log is a range scan.
      await db.schema
        .createTable('session_transitions')
        .ifNotExists()
        .addColumn('id', 'bigint', (column) => column.generatedByDefaultAsIdentity().primaryKey())
        .addColumn('session_id', 'varchar(255)', (column) => column.notNull())
        .addColumn('at', 'timestamptz', (column) => column.notNull())
        .addColumn('from_state', 'varchar(255)', (column) => column.notNull())
        .addColumn('to_state', 'varchar(255)', (column) => column.notNull())
        .addColumn('reason', 'text')
        .execute();
      await db.schema
        .createIndex('session_transitions_session_id_id_idx')
        .ifNotExists()
        .on('session_transitions')
        .columns(['session_id', 'id'])
        .execute();
    },
  },
  '0006_webhook_claims': {
    async up(db: Kysely<any>) {
      // Which process is sending a delivery, until when: with several processes on one database
      // only the claimant attempts it, and the claim of a process that died lapses.
      await db.schema
        .alterTable('webhook_deliveries')
        .addColumn('claimed_by', 'varchar(128)')
        .addColumn('claimed_until', 'timestamptz')
        .execute();
    },
  },
  '0007_webhook_owners': {
    async up(db: Kysely<any>) {
      // The user whose events a subscription receives; null (every subscription made before
      // owners existed, and those made with an admin key) receives every user's events.
      await db.schema.alterTable('webhook_subscriptions').addColumn('owner_user_id', 'varchar(255)').execute();
    },
  },
  '0008_session_lease_handover': {
    async up(db: Kysely<any>) {
      // A process keeps a session's lease while its actor is cached; another process that
      // needs the session sets this (and notifies), and the holder gives the lease back.
      await db.schema.alterTable('session_leases').addColumn('wanted', 'boolean', (column) => column.notNull().defaultTo(false)).execute();
    },
  },
  '0009_responses': {
    async up(db: Kysely<any>) {
      // The Responses API's responses: what it returned for a turn, and where in its session
      // the turn ended. The turn's messages are in `conversations`, as every turn's are.
      await db.schema
        .createTable('responses')
        .ifNotExists()
        .addColumn('id', 'varchar(64)', (column) => column.primaryKey())
        .addColumn('user_id', 'varchar(255)', (column) => column.notNull())
        .addColumn('session_id', 'varchar(255)', (column) => column.notNull())
        .addColumn('previous_response_id', 'varchar(64)')
        .addColumn('history_hash', 'text', (column) => column.notNull())
        .addColumn('body', 'jsonb', (column) => column.notNull())
        .addColumn('input', 'jsonb', (column) => column.notNull())
        .addColumn('created_at', 'timestamptz', (column) => column.notNull().defaultTo(sql`now()`))
        .execute();
      await db.schema.createIndex('responses_session_id_idx').ifNotExists().on('responses').column('session_id').execute();
    },
  },
  '0010_session_metadata': {
    async up(db: Kysely<any>) {
      // The metadata of a session seen as a conversation (the Conversations API): string
      // pairs a client attaches. Null, as in every row made before, reads as none.
      await db.schema.alterTable('sessions').addColumn('metadata', 'jsonb').execute();
    },
  },
  '0011_background_responses': {
    async up(db: Kysely<any>) {
      // A background response while it runs: the process running it, until when that process
      // last said it is alive, and whether a client asked to cancel it. The row goes when the
      // response ends; one whose process stopped renewing it is marked failed.
      await db.schema
        .createTable('background_runs')
        .ifNotExists()
        .addColumn('response_id', 'varchar(64)', (column) => column.primaryKey().references('responses.id').onDelete('cascade'))
        .addColumn('runner', 'varchar(255)', (column) => column.notNull())
        .addColumn('expires_at', 'timestamptz', (column) => column.notNull())
        .addColumn('cancel_requested', 'boolean', (column) => column.notNull().defaultTo(false))
        .execute();
      // The streaming events of background responses, numbered as the client saw them, so a
      // broken stream can be read again from any process (kept for a configured time).
      await db.schema
        .createTable('response_events')
        .ifNotExists()
        .addColumn('response_id', 'varchar(64)', (column) => column.notNull().references('responses.id').onDelete('cascade'))
        .addColumn('sequence', 'integer', (column) => column.notNull())
        .addColumn('type', 'varchar(64)', (column) => column.notNull())
        .addColumn('data', 'text', (column) => column.notNull())
        .addColumn('created_at', 'timestamptz', (column) => column.notNull().defaultTo(sql`now()`))
        .addPrimaryKeyConstraint('response_events_pkey', ['response_id', 'sequence'])
        .execute();
      await db.schema.createIndex('response_events_created_at_idx').ifNotExists().on('response_events').column('created_at').execute();
    },
  },
  '0012_session_usage': {
    async up(db: Kysely<any>) {
      // The tokens a session's LLM calls used, by model: {"<model>": {prompt_tokens, completion_tokens}}.
      // Kept when the session is deleted (its row stays, marked), so a user's totals stay whole.
      await db.schema.alterTable('sessions').addColumn('usage', 'jsonb', (column) => column.notNull().defaultTo(sql`'{}'::jsonb`)).execute();
    },
  },
  '0013_session_calls': {
    async up(db: Kysely<any>) {
      // Every LLM and tool call of a session, when `inspect.store_calls` is on: the indexed
      // facts as columns, the call itself (an LLM call's whole context) in `body`.
      await db.schema
        .createTable('session_calls')
        .ifNotExists()
        .addColumn('id', 'bigint', (column) => column.generatedByDefaultAsIdentity().primaryKey())
        .addColumn('session_id', 'varchar(255)', (column) => column.notNull())
        .addColumn('user_id', 'varchar(255)', (column) => column.notNull())
        .addColumn('turn_id', 'varchar(64)', (column) => column.notNull())
        .addColumn('kind', 'varchar(8)', (column) => column.notNull())
        .addColumn('started_at', 'timestamptz', (column) => column.notNull())
        .addColumn('body', 'jsonb', (column) => column.notNull())
        .execute();
      await db.schema.createIndex('session_calls_session_id_idx').ifNotExists().on('session_calls').columns(['session_id', 'id']).execute();
    },
  },
  '0014_responses_inline': {
    async up(db: Kysely<any>) {
      // A response row is about 2.3 kB (its body and input items as jsonb), just over the
      // 2 kB at which PostgreSQL compresses a row's values and then moves the largest out of
      // line: each insert tried to compress the body, failed to save a quarter, and wrote it
      // to the TOAST table (a second row and index entry). Rows now stay whole in the table up
      // to a page (8160 bytes); larger ones are still compressed and moved out as before.
      await sql`alter table responses set (toast_tuple_target = 8160)`.execute(db);
    },
  },
  '0015_responses_as_text': {
    async up(db: Kysely<any>) {
      // A response's body and input items are JSON the service writes and reads whole and never
      // queries into: kept as the text the client is sent, they are copied into the row where
      // jsonb had every byte parsed and rebuilt on each insert (most of what a response row
      // cost the embedded database). The status, which reads of a response's end need, gets a
      // column (filled where it is not the usual one, without a second rewrite of the table).
      await db.schema.alterTable('responses').addColumn('status', 'varchar(16)', (column) => column.notNull().defaultTo('completed')).execute();
      await sql`update responses set status = body->>'status' where body->>'status' is distinct from 'completed'`.execute(db);
      await sql`alter table responses alter column status drop default,
        alter column body type text using body::text,
        alter column input type text using input::text`.execute(db);
    },
  },
  '0016_idempotency_keys': {
    async up(db: Kysely<any>) {
      // A user's key, the request it was first used with and, once that request ended, its
      // answer (a stream's whole text), kept until it expires (`sessions.idempotency_ttl_s`).
      await db.schema
        .createTable('idempotency_keys')
        .addColumn('user_id', 'varchar(255)', (column) => column.notNull())
        .addColumn('idempotency_key', 'varchar(255)', (column) => column.notNull())
        .addColumn('request_hash', 'varchar(64)', (column) => column.notNull())
        .addColumn('state', 'varchar(16)', (column) => column.notNull())
        .addColumn('holder', 'varchar(255)', (column) => column.notNull())
        .addColumn('lease_until', 'timestamptz', (column) => column.notNull())
        .addColumn('expires_at', 'timestamptz', (column) => column.notNull())
        .addColumn('status', 'integer')
        .addColumn('headers', 'text')
        .addColumn('body', 'text')
        .addPrimaryKeyConstraint('idempotency_keys_pkey', ['user_id', 'idempotency_key'])
        .execute();
      await db.schema.createIndex('idempotency_keys_expires_at_idx').on('idempotency_keys').column('expires_at').execute();
    },
  },
  '0017_durable_turns': {
    async up(db: Kysely<any>) {
      // The steps of each session's running turn as they complete (an LLM round's reply with
      // the calls it makes, a tool call's result), for the process that continues the turn
      // after its own died; `anchor` names the turn (its base history and new messages).
      await db.schema
        .createTable('turn_steps')
        .addColumn('session_id', 'varchar(255)', (column) => column.notNull())
        .addColumn('anchor', 'varchar(64)', (column) => column.notNull())
        .addColumn('step', 'varchar(300)', (column) => column.notNull())
        .addColumn('body', 'text', (column) => column.notNull())
        .addColumn('created_at', 'timestamptz', (column) => column.notNull().defaultTo(sql`now()`))
        .addPrimaryKeyConstraint('turn_steps_pkey', ['session_id', 'anchor', 'step'])
        .execute();
      // What a background run needs to be taken over by another process: its request, how
      // many times it was, and the last event its readers were shown at a stored step.
      await db.schema
        .alterTable('background_runs')
        .addColumn('request', 'text')
        .addColumn('attempts', 'integer', (column) => column.notNull().defaultTo(0))
        .addColumn('shown_through', 'integer', (column) => column.notNull().defaultTo(1))
        .execute();
    },
  },
  '0018_call_trace_ids': {
    async up(db: Kysely<any>) {
      // The trace a call belongs to (tracing on), so that a trace id from Jaeger or a log line
      // finds its calls; null for calls made with tracing off, and for those stored before.
      await db.schema.alterTable('session_calls').addColumn('trace_id', 'varchar(32)').execute();
    },
  },
  '0019_user_token_usage': {
    async up(db: Kysely<any>) {
      // The token budgets' one counter, shared by every worker and instance: each user's tokens
      // by day (UTC), added to as calls end; a month is the sum of its days.
      await db.schema
        .createTable('user_token_usage')
        .addColumn('user_id', 'varchar(255)', (column) => column.notNull())
        .addColumn('day', 'date', (column) => column.notNull())
        .addColumn('prompt_tokens', 'bigint', (column) => column.notNull().defaultTo(0))
        .addColumn('completion_tokens', 'bigint', (column) => column.notNull().defaultTo(0))
        .addPrimaryKeyConstraint('user_token_usage_pkey', ['user_id', 'day'])
        .execute();
    },
  },
};

/**
 * Long-term vector memory, tracked apart from the core migrations so that switching the
 * feature on later (or off again) never leaves the core history out of order.
 */
export function createMemoryMigrations(embeddingDimensions: number): Record<string, Migration> {
  return {
    '0001_memories': {
      async up(db: Kysely<any>) {
        await sql`create extension if not exists vector`.execute(db);
        await db.schema
          .createTable('memories')
          .ifNotExists()
          .addColumn('id', 'integer', (column) => column.generatedByDefaultAsIdentity().primaryKey())
          .addColumn('user_id', 'varchar(255)', (column) => column.notNull())
          .addColumn('session_id', 'varchar(255)', (column) => column.notNull())
          .addColumn('content', 'text', (column) => column.notNull())
          .addColumn('embedding', sql`vector(${sql.lit(embeddingDimensions)})`, (column) => column.notNull())
          .addColumn('created_at', 'timestamptz', (column) => column.notNull().defaultTo(sql`now()`))
          .execute();
        await db.schema
          .createIndex('memories_embedding_hnsw_idx')
          .ifNotExists()
          .on('memories')
          .using('hnsw')
          .expression(sql`embedding vector_cosine_ops`)
          .execute();
        await db.schema.createIndex('memories_user_id_idx').ifNotExists().on('memories').column('user_id').execute();
        await db.schema.createIndex('memories_session_id_idx').ifNotExists().on('memories').column('session_id').execute();
      },
    },
    '0002_memory_embedder': {
      async up(db: Kysely<any>) {
        // One row: the embedder whose vectors fill `memories` (another one's are not comparable).
        await db.schema
          .createTable('memory_embedder')
          .addColumn('id', 'boolean', (column) => column.primaryKey().defaultTo(true).check(sql`id`))
          .addColumn('source', 'varchar(16)', (column) => column.notNull())
          .addColumn('model', 'varchar(255)')
          .addColumn('recorded_at', 'timestamptz', (column) => column.notNull().defaultTo(sql`now()`))
          .execute();
      },
    },
  };
}
