import { parseArgs } from 'node:util';
import { SESSION_SCENARIOS } from './scenarios.js';

/** The services a chat request can be sent to. */
export const TARGETS = ['direct', 'passthrough', 'persisted', 'pglite', 'pg'] as const;
/**
 * A place requests go: the LLM itself, the bare pass-through, the persisted pass-through (the
 * floor: the same plus the user's message and the reply committed to PostgreSQL, and a
 * session's last 20 messages kept in memory and sent upstream), or the service on one of its databases.
 */
export type Target = (typeof TARGETS)[number];

/**
 * What a run measures: chat throughput (the targets), 1 versus N service workers, memory per
 * cached session, long-term recall latency, start-up, and the scenarios measured against the
 * floor (short and long sessions, streams back to back, paced streams).
 */
export const SCENARIOS = ['throughput', 'workers', 'session-memory', 'recall', 'start-up', ...SESSION_SCENARIOS] as const;
/** One of the bench's measurements. */
export type Scenario = (typeof SCENARIOS)[number];

/** The APIs a service turn can go through: chat completions, or the Responses API (`/v1/responses`). */
export const APIS = ['chat', 'responses'] as const;
/** The API of a cell's requests. */
export type Api = (typeof APIS)[number];

/** How the service's sessions are used: one per connection, continued turn after turn, or a new one per request. */
export type SessionMode = 'session' | 'pooled' | 'new';

/** The settings of one bench run. */
export type BenchOptions = {
  durationMs: number;
  /** Measure this many requests per cell instead of a duration. */
  requests: number | undefined;
  warmup: number;
  concurrency: number[];
  streamConcurrency: number[];
  targets: Target[];
  modes: SessionMode[];
  /** The APIs of the service targets' cells (the other targets speak chat completions only). */
  apis: Api[];
  stream: boolean;
  /** Every request of the service cells carries an Idempotency-Key of its own, as a careful client's do. */
  idempotencyKeys: boolean;
  /** Every turn of the service cells calls a tool (server-everything's echo) once before it answers. */
  toolTurns: boolean;
  /** The service exports a span of every request, turn, LLM and tool call to a local OTLP sink. */
  tracing: boolean;
  profile: boolean;
  /** Starts of each service target: its cells are measured once in each, and add their rounds up. */
  rounds: number;
  /** Longest wait before a cell for other processes to leave the CPU alone. */
  quietWaitMs: number;
  dbUrl: string;
  scenarios: Scenario[];
  /** Worker counts of the service for the workers scenario. */
  workers: number[];
  /** Sessions given one turn each by the session-memory scenario. */
  sessions: number;
  /** The cache bound (sessions.cache_size) of the session-memory run that goes past it. */
  cacheBound: number;
  /** Long-term memories of the user the recall scenario queries. */
  memories: number;
  /** Timed recalls per case of the recall scenario. */
  queries: number;
  /** Sessions of five turns in each cell of the short-sessions scenario. */
  shortSessions: number;
  /** Streams at once in the paced-streams scenario. */
  pacedStreams: number;
  /** Starts of the service (and of its floor) per case of the start-up scenario. */
  starts: number;
  /** New sessions the start-up scenario caches in the started service. */
  cachedSessions: number;
  help: boolean;
};

/** The help text of `npm run bench`. */
export const BENCH_USAGE = `Usage: npm run bench -- [options]
  --duration S           measured seconds per cell (default 5)
  --requests N           measure N requests per cell instead of a duration
  --warmup N             warm-up requests per cell, per worker in the workers scenario (default 500)
  --quick                1 s cells, 100 warm-up requests; small session-memory, recall, start-up, short-sessions
                         and paced-streams sizes
  --scenario LIST        of throughput,workers,session-memory,recall,start-up,short-sessions,long-sessions,streams,
                         paced-streams (default all; the full sizes take about an hour)
  --concurrency LIST     connections for non-streaming cells (default 1,32,128)
  --stream-concurrency L connections for streaming cells (default 1,32)
  --targets LIST         of direct,passthrough,persisted,pglite,pg (default all); the scenarios against the floor
                         measure direct (only where a cell adds to it), persisted (the floor), pg and pglite
  --modes LIST           service session modes: session (one per client, over its own connection), pooled (one
                         per client, the clients sharing one pool of connections), new (one per request);
                         default session,new
  --apis LIST            of chat,responses: the APIs of the pglite and pg cells (default chat); a responses client
                         chains its turns with previous_response_id (session, pooled) or sends none (new)
  --rounds N             start each service target (pglite, pg) N times and measure its cells in each start, a cell
                         adding its rounds up; the Responses API comparison lists each round's ratios (default 1)
  --no-stream            skip the streaming cells
  --idempotency-keys     every request of the service cells carries an Idempotency-Key of its own
  --tool-turns           every chat turn of the service cells calls a tool once (server-everything's echo, over stdio)
                         before it answers: a turn of two LLM rounds, its steps stored as they complete
  --tracing              the service traces every request (OpenTelemetry on, every span kept) and exports the spans
                         over OTLP/HTTP protobuf to a sink in the bench process; run once with and once without to
                         compare the turn path's cost
  --profile              CPU-profile the service (each API apart); alone it means --targets pglite --modes session
                         --concurrency 32 --no-stream
  --quiet-wait S         before each cell, wait up to S seconds for other processes + steal to take < 0.2 cores (default 60; 0: don't)
  --db-url URL           PostgreSQL server for the persisted and pg targets, the workers and recall scenarios (default $BENCH_DB_URL or postgres://postgres@127.0.0.1:5432/test)
workers:
  --workers LIST         APP_WORKERS of the service on PostgreSQL (default 1,4); cells use --concurrency and --modes
session-memory:
  --sessions N           new sessions, one turn each (default 100000; quick 2000)
  --cache-bound N        sessions.cache_size of the run that goes past it (default 10000; quick 500)
recall:
  --memories N           memories of the queried user (default 100000; quick 10000)
  --queries N            timed recalls per case (default 1000; quick 200)
short-sessions (1,000 sessions x 5 turns at 128 and 32 connections, against the floor):
  --short-sessions N     sessions of 5 turns per cell (default 1000; quick 200)
long-sessions (one session per connection, 20 messages of history, 128 and 1 connections), streams (200 chunks,
back to back, 16 and 1 at once): cells of --duration after the sessions are filled
paced-streams (200 chunks 20 ms apart, all at once, a 12 s window):
  --paced-streams N      streams at once (default 200; quick 40)
start-up:
  --starts N             starts of the compiled service, and of its floor, per case (default 5; quick 2)
  --cached-sessions N    new sessions then cached by the started service, per database (default 10000; quick 1000)`;

/** Parses the command line of `npm run bench`. */
export function parseBenchOptions(args: string[]): BenchOptions {
  const { values } = parseArgs({
    args,
    strict: true,
    options: {
      duration: { type: 'string' },
      requests: { type: 'string' },
      warmup: { type: 'string' },
      quick: { type: 'boolean', default: false },
      concurrency: { type: 'string' },
      'stream-concurrency': { type: 'string' },
      targets: { type: 'string' },
      modes: { type: 'string' },
      apis: { type: 'string' },
      'no-stream': { type: 'boolean', default: false },
      'idempotency-keys': { type: 'boolean', default: false },
      'tool-turns': { type: 'boolean', default: false },
      tracing: { type: 'boolean', default: false },
      rounds: { type: 'string' },
      profile: { type: 'boolean', default: false },
      'quiet-wait': { type: 'string' },
      'db-url': { type: 'string' },
      scenario: { type: 'string' },
      workers: { type: 'string' },
      sessions: { type: 'string' },
      'cache-bound': { type: 'string' },
      memories: { type: 'string' },
      queries: { type: 'string' },
      'short-sessions': { type: 'string' },
      'paced-streams': { type: 'string' },
      starts: { type: 'string' },
      'cached-sessions': { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const profileOnly = values.profile && values.targets === undefined;
  const scenarios = oneOf('--scenario', list(values.scenario ?? (profileOnly ? 'throughput' : SCENARIOS.join(','))), SCENARIOS);
  const sized = (flag: string, value: string | undefined, full: number, quick: number) =>
    value !== undefined ? count(flag, value) : values.quick ? quick : full;
  return {
    durationMs: 1000 * (values.duration !== undefined ? positive('--duration', values.duration) : values.quick ? 1 : 5),
    requests: values.requests === undefined ? undefined : positive('--requests', values.requests),
    warmup: values.warmup !== undefined ? positive('--warmup', values.warmup, true) : values.quick ? 100 : 500,
    concurrency: list(values.concurrency ?? (profileOnly ? '32' : '1,32,128')).map((n) => positive('--concurrency', n)),
    streamConcurrency: list(values['stream-concurrency'] ?? '1,32').map((n) => positive('--stream-concurrency', n)),
    // The targets are the throughput scenario's and the floor's scenarios': without them, none is measured.
    targets: scenarios.some((scenario) => scenario === 'throughput' || (SESSION_SCENARIOS as readonly string[]).includes(scenario)) ? oneOf('--targets', list(values.targets ?? (profileOnly ? 'pglite' : TARGETS.join(','))), TARGETS) : [],
    modes: oneOf('--modes', list(values.modes ?? (profileOnly ? 'session' : 'session,new')), ['session', 'pooled', 'new'] as const),
    apis: oneOf('--apis', list(values.apis ?? 'chat'), APIS),
    stream: !values['no-stream'] && !profileOnly,
    idempotencyKeys: values['idempotency-keys'],
    toolTurns: values['tool-turns'],
    tracing: values.tracing,
    profile: values.profile,
    rounds: values.rounds === undefined ? 1 : count('--rounds', values.rounds),
    quietWaitMs: 1000 * (values['quiet-wait'] !== undefined ? positive('--quiet-wait', values['quiet-wait'], true) : 60),
    dbUrl: values['db-url'] ?? process.env.BENCH_DB_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    scenarios,
    workers: list(values.workers ?? '1,4').map((n) => count('--workers', n)),
    sessions: sized('--sessions', values.sessions, 100_000, 2_000),
    cacheBound: sized('--cache-bound', values['cache-bound'], 10_000, 500),
    memories: sized('--memories', values.memories, 100_000, 10_000),
    queries: sized('--queries', values.queries, 1_000, 200),
    shortSessions: sized('--short-sessions', values['short-sessions'], 1_000, 200),
    pacedStreams: sized('--paced-streams', values['paced-streams'], 200, 40),
    starts: sized('--starts', values.starts, 5, 2),
    cachedSessions: sized('--cached-sessions', values['cached-sessions'], 10_000, 1_000),
    help: values.help,
  };
}

function list(value: string): string[] {
  return value.split(',').map((item) => item.trim()).filter(Boolean);
}

function positive(flag: string, value: string, zeroAllowed = false): number {
  const number = Number(value);
  if (!(number > 0 || (zeroAllowed && number === 0)) || !Number.isFinite(number)) throw new Error(`${flag} must be a positive number, got '${value}'`);
  return number;
}

function count(flag: string, value: string): number {
  const number = positive(flag, value);
  if (!Number.isInteger(number)) throw new Error(`${flag} must be a whole number, got '${value}'`);
  return number;
}

function oneOf<T extends string>(flag: string, values: string[], allowed: readonly T[]): T[] {
  const wrong = values.filter((value) => !(allowed as readonly string[]).includes(value));
  if (wrong.length > 0) throw new Error(`${flag}: unknown ${wrong.join(', ')} (allowed: ${allowed.join(', ')})`);
  return values as T[];
}
