import { randomUUID } from 'node:crypto';
import { getHeapStatistics } from 'node:v8';
import { parseArgs } from 'node:util';
import { loadConfig } from '../../config/load-config.js';
import { loadGraph } from '../../config/load-graph.js';
import { parseChatRequest } from '../../gateway/chat/chat-request.js';
import { supervisorSettingsOf } from '../../gateway/server/service.js';
import { DurableWriter } from '../../runtime/sessions/durable-writer.js';
import { EventBus } from '../../runtime/observability/event-bus.js';
import { createLlmClient } from '../../runtime/llm/llm-client.js';
import { Supervisor } from '../../runtime/sessions/supervisor.js';
import { createDatabase, createStores, migrateToLatest } from '../../storage/index.js';
import { chatBodies } from './chat-body.js';

/** Memory of the process at one point, after full garbage collections, in bytes. */
export type MemoryReading = {
  /** Sessions that had one turn so far (0: the baseline, after the warm-up sessions were evicted). */
  sessions: number;
  cachedActors: number;
  registrySize: number;
  heapUsed: number;
  rss: number;
  /** Memory outside the JS heap held by JS objects: PGlite's WebAssembly memory is most of it. */
  external: number;
};

/** What one probe run measured; printed as the last line of stdout. */
export type SessionMemoryProbeResult = {
  cacheSize: number;
  sessions: number;
  /** Turns of each session, one after the other. */
  turns: number;
  /** Turns in flight at once while filling. */
  concurrency: number;
  fillMs: number;
  baseline: MemoryReading;
  checkpoints: MemoryReading[];
  /** After every cached actor was evicted: what stays is not held by the cache. */
  afterEviction: MemoryReading;
};

const WARMUP_SESSIONS = 200;
const USER_ID = 'bench-user';

/**
 * CLI (run with `node --expose-gc`): `session-memory-probe.ts --llm URL --sessions N
 * --cache-size C --checkpoints A,B,... [--turns T] [--concurrency K]`. Builds the real
 * runtime (the supervisor with the default graph, the stores on PGlite in memory, the LLM
 * client against `--llm`), gives N new sessions T turns each (default 1), and reads the heap
 * at each checkpoint.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      llm: { type: 'string' },
      sessions: { type: 'string' },
      'cache-size': { type: 'string' },
      checkpoints: { type: 'string' },
      turns: { type: 'string', default: '1' },
      concurrency: { type: 'string', default: '8' },
    },
  });
  if (!values.llm || !values.sessions || !values['cache-size'] || !values.checkpoints) {
    throw new Error('--llm, --sessions, --cache-size and --checkpoints are required');
  }
  if (typeof globalThis.gc !== 'function') throw new Error('run with node --expose-gc');
  const sessions = Number(values.sessions);
  const cacheSize = Number(values['cache-size']);
  const concurrency = Number(values.concurrency);
  const turns = Number(values.turns);
  const checkpoints = new Set(values.checkpoints.split(',').map(Number));
  checkpoints.add(sessions);

  // A long fill outlasts the default idle time: no session is evicted for idleness while it runs.
  const config = loadConfig({ LLM_BASE_URL: values.llm, SESSIONS_CACHE_SIZE: String(cacheSize), SESSIONS_IDLE_MS: String(24 * 3_600_000) });
  const database = await createDatabase({ dataDir: 'memory://', vector: false });
  await migrateToLatest(database, { vector: false, embeddingDimensions: config.memory.embedding_dimensions });
  const stores = createStores(database);
  const events = new EventBus();
  const writer = new DurableWriter(events);
  const llm = createLlmClient({ baseUrl: config.llm.base_url, apiKey: config.llm.api_key, timeoutMs: config.llm.timeout_ms });
  // Wired as gateway/server/service.ts wires it, without tools, long-term memory or leases (one process, PGlite).
  const supervisor = new Supervisor({
    graph: loadGraph(config.state.graph_path).graph,
    llm,
    conversations: stores.conversations,
    sessions: stores.sessions,
    writer,
    events,
    settings: supervisorSettingsOf(config),
  });
  const bodies = chatBodies(false);
  const maxMessages = config.app.max_messages;
  const params = { model: config.llm.model, temperature: config.llm.temperature, max_tokens: config.llm.max_tokens };
  // As the gateway does: each request's body parsed on its own, so no two sessions share their strings.
  const turn = async (index: number, sessionId: string) => {
    const request = parseChatRequest(JSON.parse(bodies[index % bodies.length]!.toString('utf8')), { maxMessages });
    const outcome = await supervisor.runTurn(
      { userId: USER_ID, sessionHint: sessionId, messages: request.messages, params },
      { signal: new AbortController().signal },
    );
    if (outcome.failure) throw new Error(`turn ${index} failed: ${outcome.failure.message}`);
  };
  // A session's turns one after the other; each sends only its new message, as a client naming its session does.
  const conversation = async (index: number, sessionId: string) => {
    for (let number = 0; number < turns; number += 1) await turn(index + number, sessionId);
  };
  const read = async (done: number): Promise<MemoryReading> => {
    await writer.flush();
    return readMemory(done, supervisor);
  };

  // Warm-up: every code path compiled and every lazy structure allocated before the baseline.
  const warmup = Array.from({ length: WARMUP_SESSIONS }, () => randomUUID());
  await runBounded(WARMUP_SESSIONS, concurrency, (index) => conversation(index, warmup[index]!));
  for (const sessionId of warmup) supervisor.evict(sessionId);
  const baseline = await read(0);
  const readings: MemoryReading[] = [];
  const started = performance.now();
  let fillMs = 0;
  let done = 0;
  for (const checkpoint of [...checkpoints].sort((a, b) => a - b)) {
    const from = done;
    const fillStarted = performance.now();
    // Session ids as the service makes them when a client names none.
    await runBounded(checkpoint - from, concurrency, (offset) => conversation(from + offset, randomUUID()));
    fillMs += performance.now() - fillStarted;
    done = checkpoint;
    readings.push(await read(done));
    const last = readings.at(-1)!;
    console.error(
      `  ${done} sessions (${((performance.now() - started) / 1000).toFixed(0)} s): heap ${mb(last.heapUsed)} MB, rss ${mb(last.rss)} MB, ${last.cachedActors} cached`,
    );
  }
  await supervisor.stop();
  const afterEviction = await read(done);
  await llm.close();
  writer.close();
  await database.close();
  const result: SessionMemoryProbeResult = { cacheSize, sessions, turns, concurrency, fillMs, baseline, checkpoints: readings, afterEviction };
  console.log(JSON.stringify(result));
}

/** Runs `task(0 .. count-1)` with at most `concurrency` at once. */
async function runBounded(count: number, concurrency: number, task: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

/** Collects garbage until the heap stops shrinking, then reads the memory figures. */
async function readMemory(sessions: number, supervisor: Supervisor): Promise<MemoryReading> {
  let previous = Infinity;
  for (let round = 0; round < 10; round += 1) {
    // Lets timers and finalisers queued by the previous collection run before the next one.
    await new Promise((resolve) => setImmediate(resolve));
    globalThis.gc!();
    const used = getHeapStatistics().used_heap_size;
    if (used >= previous - 1024) break;
    previous = used;
  }
  const usage = process.memoryUsage();
  return {
    sessions,
    cachedActors: supervisor.cachedActors,
    registrySize: supervisor.registry.getSnapshot().context.sessions.size,
    heapUsed: usage.heapUsed,
    rss: usage.rss,
    external: usage.external,
  };
}

const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(`session-memory probe: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
