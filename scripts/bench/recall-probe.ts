import { parseArgs } from 'node:util';
import { CompiledQuery, sql, type KyselyPlugin, type QueryId, type RootOperationNode } from 'kysely';
import { loadConfig } from '../../config/load-config.js';
import { createLocalEmbedder } from '../../runtime/llm/embedder.js';
import { EventBus } from '../../runtime/observability/event-bus.js';
import { hashedEmbedding } from '../../runtime/llm/hashed-embedding.js';
import { createVectorMemory } from '../../runtime/memory/vector-memory.js';
import { createDatabase, createMemoryRepository, createStores, migrateToLatest, type Database } from '../../storage/index.js';
import { EXACT_SEARCH_UP_TO, withEfSearch } from '../../storage/memory-repository.js';
import { summarise, type LatencySummary } from './latency-stats.js';
import { createTextSource, type TextSource } from './text-source.js';

/** One measured case: whose memories are recalled, in which state of the planner's statistics. */
export type RecallCase = {
  user: string;
  /** Memories the user owns. */
  userMemories: number;
  /** `as filled`: the statistics as the service leaves them (its AutoAnalyze, on both databases); `after ANALYZE`: fresh ones. */
  statistics: 'as filled' | 'after ANALYZE';
  /** `hnsw.ef_search` of the searches (what matters only where the HNSW index is used). */
  efSearch: number;
  /** Workers storing memories throughout the case, as consolidation does after turns (0: none), and the memories they stored a second. */
  writers: number;
  writesPerSecond: number;
  /** Time of `recall` (embedding the text and the search), in ms. */
  latency: LatencySummary;
  /** EXPLAIN ANALYZE of the search statement `recall` runs. */
  plan: string[];
  /** Share of the recalled memories that are among the exact nearest ones (index scans off), over `exactQueries` queries. */
  exactShare: number;
  exactQueries: number;
};

/** What one probe run measured; printed as the last line of stdout. */
export type RecallProbeResult = {
  database: 'pglite' | 'pg';
  memories: number;
  dimensions: number;
  results: number;
  /** Storing the memories, with the vector index dropped. */
  fillMs: number;
  /** Building the vector index again, as the migration defines it, over the stored memories. */
  indexBuildMs: number;
  /** The memories table's indexes as the migration created them. */
  indexes: string[];
  cases: RecallCase[];
};

const HEAVY_USER = 'bench-user';
/** Other users, each with a few memories: a recall for one of them must skip most of the table. */
const LIGHT_USERS = 10;
const LIGHT_USER_MEMORIES = 100;
/** One user with as many memories as are still searched exactly: the slowest exact search. */
const BOUND_USER = 'bench-bound-user';
const BATCH = 500;
const WARMUP_QUERIES = 20;
const EXACT_QUERIES = 100;
/** The `hnsw.ef_search` values the heavy user's recall is measured at, besides the configured one. */
const EF_SEARCH_SWEEP = [40, 100, 200];
/** Workers consolidating at once in the last case on PostgreSQL, each storing one memory after another on a pool of its own. */
const CONSOLIDATING_WORKERS = 4;

/**
 * CLI: `recall-probe.ts --memories N --queries Q [--db-url URL]`. Migrates a database with
 * long-term memory (PGlite in memory with pgvector, or the server at `--db-url`), stores N
 * memories of one user and a few of other users with the local hashed embeddings, then
 * times `recall` of runtime/memory/vector-memory.ts and explains the search it runs.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({ options: { memories: { type: 'string' }, queries: { type: 'string' }, 'db-url': { type: 'string', default: '' } } });
  if (!values.memories || !values.queries) throw new Error('--memories and --queries are required');
  const memories = Number(values.memories);
  const queries = Number(values.queries);
  const config = loadConfig({});
  const dimensions = config.memory.embedding_dimensions;
  const results = config.memory.long_term_results;
  const database = await createDatabase({ url: values['db-url'], dataDir: 'memory://', vector: true });
  try {
    await migrateToLatest(database, { vector: true, embeddingDimensions: dimensions });
    const settings: CaseSettings = { queries, results, dimensions, texts: createTextSource(1), dbUrl: values['db-url'] };
    const indexes = await sql<{ indexname: string; indexdef: string }>`select indexname, indexdef from pg_indexes where tablename = 'memories' order by indexname`.execute(
      database.db,
    );
    const vectorIndex = indexes.rows.find((row) => / using hnsw /i.test(row.indexdef));
    if (!vectorIndex) throw new Error(`the migration created no HNSW index on memories: ${indexes.rows.map((row) => row.indexdef).join('; ')}`);
    // Stored one by one, each memory would update the HNSW graph: building it once afterwards is many times faster.
    await sql`drop index ${sql.ref(vectorIndex.indexname)}`.execute(database.db);
    const fillStarted = performance.now();
    await fill(database, HEAVY_USER, memories, settings);
    for (let user = 1; user <= LIGHT_USERS; user += 1) await fill(database, lightUser(user), LIGHT_USER_MEMORIES, settings);
    await fill(database, BOUND_USER, EXACT_SEARCH_UP_TO, settings);
    await database.autoAnalyze.settled();
    const fillMs = performance.now() - fillStarted;
    const indexBuildMs = await buildIndex(database, vectorIndex.indexdef);
    const cases: RecallCase[] = [];
    const configured = { efSearch: config.memory.hnsw_ef_search, writers: 0 };
    for (const statistics of ['as filled', 'after ANALYZE'] as const) {
      if (statistics === 'after ANALYZE') await sql`analyze memories`.execute(database.db);
      cases.push(await measureCase(database, HEAVY_USER, memories, statistics, settings, configured));
      cases.push(await measureCase(database, lightUser(1), LIGHT_USER_MEMORIES, statistics, settings, configured));
      cases.push(await measureCase(database, BOUND_USER, EXACT_SEARCH_UP_TO, statistics, settings, configured));
    }
    // Only the heavy user's recall goes through the HNSW index: the others are exact whatever ef_search is.
    for (const efSearch of EF_SEARCH_SWEEP.filter((value) => value !== configured.efSearch)) {
      cases.push(await measureCase(database, HEAVY_USER, memories, 'after ANALYZE', settings, { efSearch, writers: 0 }));
    }
    // The embedded database serves one process: one consolidating beside the recalls.
    const writers = database.kind === 'pg' ? CONSOLIDATING_WORKERS : 1;
    cases.push(await measureCase(database, HEAVY_USER, memories, 'after ANALYZE', settings, { ...configured, writers }));
    const result: RecallProbeResult = {
      database: database.kind,
      memories,
      dimensions,
      results,
      fillMs,
      indexBuildMs,
      indexes: indexes.rows.map((row) => row.indexdef),
      cases,
    };
    console.log(JSON.stringify(result));
  } finally {
    await database.close();
  }
}

const lightUser = (index: number) => `bench-user-${index}`;

/** Memory for building the HNSW graph: below the graph's size the build slows down many times. */
const BUILD_MEMORY = '1GB';

/** Creates the index from its definition, with room to build the graph in memory; returns how long it took in ms. */
async function buildIndex(database: Database, definition: string): Promise<number> {
  const started = performance.now();
  await database.db.connection().execute(async (connection) => {
    await sql`select set_config('maintenance_work_mem', ${BUILD_MEMORY}, false)`.execute(connection);
    await sql.raw(definition).execute(connection);
    await sql`reset maintenance_work_mem`.execute(connection);
  });
  const buildMs = performance.now() - started;
  console.error(`  vector index built in ${(buildMs / 1000).toFixed(0)} s`);
  return buildMs;
}

/** Stores `count` memories of `userId` in batches through the service's memory store, as consolidation does one by one. */
async function fill(database: Database, userId: string, count: number, { dimensions, texts }: CaseSettings): Promise<void> {
  const store = createStores(database).memories!;
  const started = performance.now();
  for (let done = 0; done < count; done += BATCH) {
    const entries = Array.from({ length: Math.min(BATCH, count - done) }, (_, index) => {
      const content = `User: ${texts.sentence(14)}\nAssistant: ${texts.sentence(24)}`;
      return { userId, sessionId: `bench-session-${(done + index) % 1000}`, content, embedding: hashedEmbedding(content, dimensions) };
    });
    await store.add(entries);
    if ((done / BATCH) % 20 === 19) console.error(`  ${done + BATCH} memories of ${userId} (${((performance.now() - started) / 1000).toFixed(0)} s)`);
  }
}

/** Settings every case shares. */
type CaseSettings = { queries: number; results: number; dimensions: number; texts: TextSource; dbUrl: string };

/** How a case searches, and what runs beside it. */
type CaseLoad = { efSearch: number; writers: number };

async function measureCase(
  database: Database,
  userId: string,
  userMemories: number,
  statistics: RecallCase['statistics'],
  settings: CaseSettings,
  { efSearch, writers }: CaseLoad,
): Promise<RecallCase> {
  const { queries, results, dimensions, texts } = settings;
  const spy = createQuerySpy();
  const store = createMemoryRepository(database.db.withPlugin(spy.plugin), { efSearch });
  const events = new EventBus();
  events.on('storage:error', ({ error }) => {
    throw error;
  });
  const memory = createVectorMemory({ store, embedder: createLocalEmbedder(dimensions), events, results });
  const durations: number[] = [];
  const consolidating = await startWriters(database, writers, settings);
  let writesPerSecond = 0;
  try {
    for (let index = 0; index < WARMUP_QUERIES + queries; index += 1) {
      const text = texts.sentence(14);
      const started = performance.now();
      const recalled = await memory.recall(userId, text);
      if (index >= WARMUP_QUERIES) durations.push(performance.now() - started);
      if (recalled.length !== Math.min(results, userMemories)) throw new Error(`recall for ${userId} gave ${recalled.length} memories`);
    }
  } finally {
    writesPerSecond = await consolidating.stop();
  }
  const { node, queryId } = spy.last();
  const search = database.db.getExecutor().compileQuery(node, queryId);
  // The plan as the search ran it: with the case's ef_search, in a transaction of its own.
  const explained = await withEfSearch(database.db, efSearch, (trx) =>
    trx.executeQuery<{ 'QUERY PLAN': string }>(CompiledQuery.raw(`explain (analyze, buffers) ${search.sql}`, [...search.parameters])),
  );
  const exact = await exactShare(database, userId, settings, efSearch);
  const latency = summarise(durations);
  console.error(
    `  recall ${userId} (${statistics}, ef_search ${efSearch}, ${writers} writers${writers ? `: ${writesPerSecond.toFixed(0)} memories/s` : ''}): p50 ${latency.p50.toFixed(2)} ms, p99 ${latency.p99.toFixed(2)} ms, exact ${(100 * exact).toFixed(0)}%`,
  );
  return {
    user: userId,
    userMemories,
    statistics,
    efSearch,
    writers,
    writesPerSecond,
    latency,
    // The query vector's 256 numbers say nothing about the plan.
    plan: explained.rows.map((row) => row['QUERY PLAN'].replace(/'\[[^\]]*\]'::vector/g, "'[…]'::vector")),
    exactShare: exact,
    exactQueries: EXACT_QUERIES,
  };
}

/** A Kysely plugin that records the last statement run through it, so that it can be explained as it was run. */
function createQuerySpy(): { plugin: KyselyPlugin; last(): { node: RootOperationNode; queryId: QueryId } } {
  let last: { node: RootOperationNode; queryId: QueryId } | undefined;
  return {
    plugin: {
      transformQuery(args) {
        last = { node: args.node, queryId: args.queryId };
        return args.node;
      },
      transformResult: async (args) => args.result,
    },
    last() {
      if (!last) throw new Error('no statement ran');
      return last;
    },
  };
}

/**
 * Compares the repository's search with an exact one (index scans off, so every memory of
 * the user is measured): the share of the returned ids that are among the exact nearest.
 */
async function exactShare(database: Database, userId: string, { results, dimensions, texts }: CaseSettings, efSearch: number): Promise<number> {
  let found = 0;
  let wanted = 0;
  // One connection throughout: the setting is per connection (and PGlite has only one).
  await database.db.connection().execute(async (connection) => {
    const store = createMemoryRepository(connection, { efSearch });
    for (let index = 0; index < EXACT_QUERIES; index += 1) {
      const embedding = hashedEmbedding(texts.sentence(14), dimensions);
      const approximate = await store.search(userId, embedding, results);
      await sql`set enable_indexscan = off`.execute(connection);
      const exact = await store.search(userId, embedding, results);
      await sql`reset enable_indexscan`.execute(connection);
      const exactIds = new Set(exact.map((entry) => entry.id));
      found += approximate.filter((entry) => exactIds.has(entry.id)).length;
      wanted += exact.length;
    }
  });
  return wanted === 0 ? 1 : found / wanted;
}

/**
 * `count` workers storing one memory after another (of users of their own) until stopped, as
 * consolidation does after each turn: on PostgreSQL each on a pool of its own, as the service's
 * workers are; on PGlite through its one connection, beside the recalls.
 */
async function startWriters(database: Database, count: number, { dimensions, texts, dbUrl }: CaseSettings): Promise<{ stop(): Promise<number> }> {
  const started = performance.now();
  let stopped = false;
  let writes = 0;
  const loops = await Promise.all(
    Array.from({ length: count }, async (_, worker) => {
      const own = database.kind === 'pg' ? await createDatabase({ url: dbUrl, dataDir: 'unused', vector: true, poolSize: 1 }) : undefined;
      const store = createMemoryRepository((own ?? database).db);
      // Wrapped: an async function returning the loop's promise would wait for the loop to end.
      const loop = (async () => {
        try {
          while (!stopped) {
            const content = `User: ${texts.sentence(14)}\nAssistant: ${texts.sentence(24)}`;
            await store.add([{ userId: `bench-writer-${worker}`, sessionId: `bench-writer-session-${worker}`, content, embedding: hashedEmbedding(content, dimensions) }]);
            writes += 1;
          }
        } finally {
          await own?.close();
        }
      })();
      return { loop };
    }),
  );
  return {
    /** Stops the workers; the memories they stored a second. */
    async stop() {
      stopped = true;
      const seconds = (performance.now() - started) / 1000;
      await Promise.all(loops.map(({ loop }) => loop));
      return writes / seconds;
    },
  };
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(`recall probe: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
