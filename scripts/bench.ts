import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chatBodies } from './bench/chat-body.js';
import { benchProcesses, freePort, startChild, type RunningChild } from './bench/child-process.js';
import { addCleanup, runCleanups } from './bench/cleanup.js';
import { startOtlpSink } from './bench/otlp-sink.js';
import { compareSelfTime, readSelfTime, type SelfTimeComparison, type SelfTimeReport } from './bench/cpu-profile.js';
import { averageCpu, postgresPids, waitForQuiet, watchCpu, type CpuUsage } from './bench/cpu-usage.js';
import { jsonExchange, responsesExchange, responsesStreamExchange, runLoad, runLoadPhase, streamExchange, summariseLoad, type Exchange, type LoadPhase, type LoadResult } from './bench/load.js';
import { BENCH_USAGE, parseBenchOptions, type Api, type BenchOptions, type SessionMode, type Target } from './bench/options.js';
import type { CellResult } from './bench/cell-result.js';
import { checkGoals, describeMachine, isService, renderText, writeReport, type BenchReport } from './bench/report.js';
import { measureRecall } from './bench/recall-latency.js';
import { responsesBodies } from './bench/responses-body.js';
import { createScratchDatabase, type ScratchDatabase } from './bench/scratch-database.js';
import { DEFAULT_POOL_SIZE } from '../storage/index.js';
import { HISTORY_MESSAGES, scenarioBodies, scenarioCells, sessionHeaders, SESSION_SCENARIOS, type ScenarioCell, type SessionScenario } from './bench/scenarios.js';
import { measureSessionMemory } from './bench/session-memory.js';
import { measureStartUp } from './bench/start-up.js';
import { ensureBuilt } from './build.mjs';
import { SERVICE_SCRIPT, startNodeFlags } from './bench/start-command.js';
import { waitForWorkers } from './bench/worker-connections.js';

/** Other processes and the hypervisor taking more CPU than this (in cores) make a cell noisy. */
const QUIET_CORES = 0.2;
/** The processes whose CPU each cell reports: the bench, the processes under test, the PostgreSQL server. */
const watched = () => ({ ...benchProcesses(), postgres: postgresPids() });
const ROOT = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
/** The Node flags `npm start` gives the service; the pass-throughs under test run with them too. */
const NODE_FLAGS = startNodeFlags(ROOT);

/** What a run has gathered so far. */
type Run = {
  options: BenchOptions;
  stamp: string;
  tmp: string;
  cells: CellResult[];
  notes: string[];
  profile: SelfTimeReport[];
  profileComparison: SelfTimeComparison[];
};

/** One `npm run bench`: the fake LLM, then each selected target in turn, then the report. */
async function main(): Promise<void> {
  const options = parseBenchOptions(process.argv.slice(2));
  if (options.help) return console.log(BENCH_USAGE);
  const date = new Date();
  const stamp = date.toISOString().slice(0, 19).replace(/:/g, '-');
  const machine = describeMachine(ROOT);
  const tmp = await mkdtemp(join(tmpdir(), 'svc-bench-'));
  addCleanup(() => rm(tmp, { recursive: true, force: true }));
  const run: Run = { options, stamp, tmp, cells: [], notes: [], profile: [], profileComparison: [] };
  // Every process runs compiled, as \`npm start\` runs the service: compiled first when the sources changed.
  ensureBuilt(ROOT);

  const llm = await startChild({
    name: 'fake LLM',
    script: 'dist/scripts/fake-llm.js',
    args: ['--port', '0', '--host', '127.0.0.1'],
    cwd: ROOT,
    ready: { line: /fake LLM listening on (http:\/\/\S+)\/v1/ },
  });
  if (options.scenarios.includes('throughput')) await benchThroughput(run, llm.url);
  for (const workers of options.scenarios.includes('workers') ? options.workers : []) await benchOnPostgres(run, llm.url, workers);
  for (const scenario of SESSION_SCENARIOS.filter((name) => options.scenarios.includes(name))) await benchScenario(run, scenario, llm.url);
  const sessionMemory = options.scenarios.includes('session-memory') ? await measureSessionMemory(options, llm.url, ROOT) : undefined;
  const startUp = options.scenarios.includes('start-up')
    ? await measureStartUp({ runs: options.starts, cachedSessions: options.cachedSessions, dbUrl: options.dbUrl }, llm.url, ROOT, tmp)
    : undefined;
  await llm.stop();
  const recall = options.scenarios.includes('recall') ? await measureRecall(options, ROOT) : undefined;

  const report: BenchReport = {
    date: date.toISOString(),
    machine,
    options: settingsOf(options),
    cells: run.cells,
    goals: checkGoals(run.cells, startUp),
    notes: run.notes,
    ...(run.profile.length > 0 ? { profile: run.profile } : {}),
    ...(run.profileComparison.length > 0 ? { profileComparison: run.profileComparison } : {}),
    ...(sessionMemory ? { sessionMemory } : {}),
    ...(recall ? { recall } : {}),
    ...(startUp ? { startUp } : {}),
  };
  console.log(renderText(report));
  const files = await writeReport(report, join(ROOT, 'bench-results'), stamp);
  console.log(`\nWritten: ${files.join(', ')}`);
}

/** The throughput scenario: each of the targets selected, at each concurrency (and session mode and API). */
async function benchThroughput(run: Run, llmUrl: string): Promise<void> {
  if (run.options.targets.includes('direct')) await measureBaseline(run, 'direct', llmUrl, [null], run.options.stream);
  if (run.options.targets.includes('passthrough')) {
    const passthrough = await startChild({
      name: 'passthrough',
      script: 'dist/scripts/bench/passthrough.js',
      nodeArgs: NODE_FLAGS,
      args: ['--upstream', llmUrl],
      cwd: ROOT,
      ready: { line: /passthrough listening on (http:\/\/\S+)/ },
    });
    await measureBaseline(run, 'passthrough', passthrough.url, [null], false);
    await stopChecked(run, passthrough);
  }
  if (run.options.targets.includes('persisted')) await benchPersistedPassthrough(run, llmUrl);
  if (run.options.targets.includes('pglite')) await benchService(run, 'pglite', llmUrl, '');
  if (run.options.targets.includes('pg')) await benchOnPostgres(run, llmUrl);
}

function settingsOf({ help: _help, ...settings }: BenchOptions): BenchReport['options'] {
  return settings;
}

/** The service on a scratch database of the PostgreSQL server; `workers` set: the workers scenario's run with that many. */
async function benchOnPostgres(run: Run, llmUrl: string, workers?: number): Promise<void> {
  const service = `service pg${workers !== undefined ? ` with ${workerCount(workers)}` : ''}`;
  await onScratchDatabase(run, service, (url) => benchService(run, 'pg', llmUrl, url, workers));
}

/**
 * The persisted pass-through (the floor: the user's message and the reply committed, a
 * session's last 20 messages kept in memory and sent upstream) on a scratch database, with
 * the service's default pool size, one session per connection, streaming too.
 */
async function benchPersistedPassthrough(run: Run, llmUrl: string): Promise<void> {
  await onScratchDatabase(run, 'persisted passthrough', async (url) => {
    const persisted = await startFloor(llmUrl, url);
    await measureBaseline(run, 'persisted', persisted.url, ['session'], run.options.stream);
    await stopChecked(run, persisted);
  });
}

/** Starts the persisted pass-through (the floor) on the database at `dbUrl`, with the service's default pool size. */
function startFloor(llmUrl: string, dbUrl: string): Promise<RunningChild> {
  return startChild({
    name: 'persisted passthrough',
    script: 'dist/scripts/bench/passthrough.js',
    nodeArgs: NODE_FLAGS,
    args: ['--upstream', llmUrl, '--db-url', dbUrl, '--pool-size', String(DEFAULT_POOL_SIZE), '--history-turns', String(HISTORY_MESSAGES)],
    cwd: ROOT,
    ready: { line: /passthrough listening on (http:\/\/\S+)/ },
  });
}

/**
 * A scenario measured against the floor: the LLM alone (in the cells that read what a target
 * adds to it), the floor, and the service on the PostgreSQL server and on PGlite, each of the
 * selected targets started afresh on a new database for the scenario, driven unmeasured, then
 * measured in each of the scenario's cells.
 */
async function benchScenario(run: Run, scenario: SessionScenario, llmUrl: string): Promise<void> {
  const cells = scenarioCells(scenario, run.options);
  const selected = (target: Target) => run.options.targets.includes(target);
  if (selected('direct') && cells.some((cell) => cell.againstDirect)) {
    await measureScenario(run, scenario, 'direct', llmUrl, cells.filter((cell) => cell.againstDirect));
  }
  if (selected('persisted')) {
    await onScratchDatabase(run, `${scenario}: persisted passthrough`, async (url) => {
      const floor = await startFloor(llmUrl, url);
      await measureScenario(run, scenario, 'persisted', floor.url, cells);
      await stopChecked(run, floor);
    });
  }
  if (selected('pg')) await onScratchDatabase(run, `${scenario}: service pg`, (url) => benchServiceInScenario(run, scenario, 'pg', llmUrl, url, cells));
  if (selected('pglite')) await benchServiceInScenario(run, scenario, 'pglite', llmUrl, '', cells);
}

/** Starts the service on a new database (a new PGlite folder, or the scratch database at `dbUrl`), measures a scenario's cells, stops it, and ranks its profile when asked. */
async function benchServiceInScenario(run: Run, scenario: SessionScenario, target: 'pglite' | 'pg', llmUrl: string, dbUrl: string, cells: ScenarioCell[]): Promise<void> {
  const profileDir = join(ROOT, 'bench-results', `profile-${run.stamp}-${scenario}-${target}`);
  const service = await startService(run, {
    target,
    llmUrl,
    dbUrl,
    dataDir: join(run.tmp, `pglite-${scenario}`),
    nodeArgs: run.options.profile ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [],
    env: {},
  });
  const measured = await measureScenario(run, scenario, target, service.url, cells);
  await stopChecked(run, service);
  if (run.options.profile) await rankProfile(run, profileDir, ['chat'], measured);
}

/**
 * Measures a target in a scenario's cells. A process under test is first driven unmeasured
 * (--warmup requests, 16 at a time, unpaced, on sessions of its own), so that no cell, the
 * paced streams' that opens at once least of all, measures code still being compiled.
 */
async function measureScenario(run: Run, scenario: SessionScenario, target: Target, origin: string, cells: ScenarioCell[]): Promise<MeasuredCell[]> {
  const prefix = `bench-${run.stamp}-${scenario}-${target}`;
  if (target !== 'direct') {
    const { paceMs: _unpaced, ...first } = cells[0]!;
    const exchange = scenarioExchange(first, target, `${prefix}-warm-up`);
    const result = await runLoad({ origin, connections: 16, warmup: 0, durationMs: 0, requests: run.options.warmup, exchange });
    if (result.errors > 0) run.notes.push(`${scenario}: ${target} warm-up: ${result.errors} errors, e.g. ${result.errorSamples[0]}`);
  }
  const measured: MeasuredCell[] = [];
  for (const cell of cells) {
    const setting: CellSetting = { target, api: 'chat', mode: target === 'direct' ? null : 'session', stream: cell.stream, connections: cell.connections, scenario };
    const exchange = scenarioExchange(cell, target, `${prefix}-c${cell.connections}`);
    const phase = await measurePhase(run, setting, origin, exchange, { warmup: cell.warmup, durationMs: cell.durationMs, requests: cell.requests });
    recordCell(run, setting, [[phase]]);
    printCell(cellLabel(setting), summariseCell([phase]));
    measured.push({ setting, phases: [phase] });
  }
  return measured;
}

/** The requests of a scenario's cell: the LLM alone gets the whole conversation, the others each client's session named. */
function scenarioExchange(cell: ScenarioCell, target: Target, prefix: string): Exchange {
  const direct = target === 'direct';
  const headers = direct ? () => ({ 'content-type': 'application/json' }) : sessionHeaders(prefix, cell.turnsPerSession);
  return (cell.stream ? streamExchange : jsonExchange)(scenarioBodies(cell, direct), headers);
}

/** Runs `measure` on a database created for it on the PostgreSQL server, dropped afterwards; notes a skip when the server is down. */
async function onScratchDatabase(run: Run, name: string, measure: (url: string) => Promise<void>): Promise<void> {
  let database: ScratchDatabase;
  try {
    database = await createScratchDatabase(run.options.dbUrl);
  } catch (error) {
    const note = `${name} skipped: PostgreSQL at ${run.options.dbUrl} is not reachable (${error instanceof Error ? error.message : String(error)})`;
    run.notes.push(note);
    console.error(note);
    return;
  }
  const unregister = addCleanup(database.drop);
  run.notes.push(`${name} ran on a scratch database ${database.name} created on ${run.options.dbUrl} and dropped afterwards (pool size ${DEFAULT_POOL_SIZE}, the service default)`);
  try {
    await measure(database.url);
  } finally {
    unregister();
    await database.drop();
  }
}

/**
 * Measures the service on one database: its cells in each of `--rounds` starts of the service
 * (a cell adds its rounds up), and each start's CPU profile when asked. One process's compiled
 * code and heap weigh on all of its cells alike.
 */
async function benchService(run: Run, target: 'pglite' | 'pg', llmUrl: string, dbUrl: string, workers?: number): Promise<void> {
  const rounds: MeasuredCell[][] = [];
  for (let round = 1; round <= run.options.rounds; round++) rounds.push(await serviceRound(run, { target, llmUrl, dbUrl, workers, round }));
  for (const [index, cell] of rounds[0]!.entries()) recordCell(run, cell.setting, rounds.map((cells) => cells[index]!.phases));
}

/** One start of the service under test: which target, on which database, with how many workers, in which round. */
type ServiceStart = { target: 'pglite' | 'pg'; llmUrl: string; dbUrl: string; workers?: number; round: number };

/** Starts the service, measures its cells, stops it, and reads its CPU profile when asked. */
async function serviceRound(run: Run, { target, llmUrl, dbUrl, workers, round }: ServiceStart): Promise<MeasuredCell[]> {
  const roundSuffix = run.options.rounds > 1 ? `-r${round}` : '';
  const traces = run.options.tracing ? await startOtlpSink() : undefined;
  const unregisterSink = traces ? addCleanup(traces.close) : undefined;
  const profileDir = join(ROOT, 'bench-results', `profile-${run.stamp}-${target}${workers !== undefined ? `-w${workers}` : ''}${roundSuffix}`);
  const service = await startService(run, {
    target,
    llmUrl,
    dbUrl,
    dataDir: join(run.tmp, `pglite-${target}`),
    workers,
    nodeArgs: run.options.profile ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [],
    env: {
      ...(run.options.toolTurns ? { CONFIG_FILE: await toolServerFile(run) } : {}),
      // --tracing: every span kept and sent, in batches as often as the SDK's default (5 s).
      ...(traces ? { OTEL_EXPORTER_OTLP_ENDPOINT: traces.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', OTEL_TRACES_SAMPLER: 'always_on' } : {}),
    },
  });
  if (workers !== undefined && workers > 1) {
    const held = await waitForWorkers(service.url, Number(new URL(service.url).port), service.process.pid!, workers);
    run.notes.push(`${service.name}${roundSuffix}: every worker took connections before the first cell (a batch of ${held.reduce((a, b) => a + b, 0)} held ${held.join('/')})`);
  }
  // The workers scenario compares worker counts on chat completions only.
  const apis = workers === undefined ? run.options.apis : (['chat'] as Api[]);
  await warmUp(run, target, service.url, apis, round, workers);
  const cells = await measureTarget(run, target, service.url, run.options.modes, apis, workers === undefined && run.options.stream, { workers, round });
  await stopChecked(run, service);
  if (traces) {
    unregisterSink?.();
    await traces.close();
    run.notes.push(`${service.name}${roundSuffix}: traced (--tracing), ${traces.exports} OTLP exports of ${(traces.bytes / 1e6).toFixed(1)} MB to the local sink`);
  }
  if (run.options.profile) await rankProfile(run, profileDir, apis, cells);
  return cells;
}

/** How the service under test is started: on which database and data folder, with how many workers, which extra Node flags and environment. */
type ServiceLaunch = { target: 'pglite' | 'pg'; llmUrl: string; dbUrl: string; dataDir: string; workers?: number; nodeArgs: string[]; env: NodeJS.ProcessEnv };

/** Starts the service as \`npm start\` runs it, on a port of its own, and waits until it answers. */
async function startService(run: Run, { target, llmUrl, dbUrl, dataDir, workers, nodeArgs, env }: ServiceLaunch): Promise<RunningChild> {
  const port = await freePort();
  return startChild({
    name: `service ${target}${workers !== undefined ? ` ${workers}w` : ''}`,
    // The command \`npm start\` runs.
    script: SERVICE_SCRIPT,
    nodeArgs: [...NODE_FLAGS, ...nodeArgs],
    cwd: ROOT,
    env: {
      ...process.env,
      APP_HOST: '127.0.0.1',
      APP_PORT: String(port),
      LLM_BASE_URL: `${llmUrl}/v1`,
      DATA_DIR: dataDir,
      DB_URL: dbUrl,
      APP_WORKERS: String(workers ?? 1),
      // The load comes from one user: per-user limits would measure the limiter, not the service.
      LIMITS_REQUESTS_PER_MINUTE: '0',
      LIMITS_CONCURRENT_REQUESTS: '0',
      // At info the service logs a line per request; at warn its ready line is not printed, so it is probed.
      LOG_LEVEL: 'warn',
      ...env,
    },
    ready: { probe: `http://127.0.0.1:${port}/v1/models` },
  });
}

/** Ranks the self time of a service's profile in its measured windows, each API's apart (one process served them all). */
async function rankProfile(run: Run, profileDir: string, apis: Api[], cells: MeasuredCell[]): Promise<void> {
  const ranked = await Promise.all(
    apis.map(async (api) => {
      const phases = cells.filter((cell) => cell.setting.api === api).flatMap((cell) => cell.phases);
      const threads = await readSelfTime(profileDir, ROOT, phases.map((phase) => phase.load.windowUs), Number.POSITIVE_INFINITY);
      const turns = phases.reduce((sum, phase) => sum + phase.load.answers, 0);
      // Threads that were idle all along (tsx's module loader) are left out.
      return threads.filter((thread) => thread.totalMs - thread.idleMs > 0.05 * thread.totalMs).map((thread) => ({ ...thread, ...(apis.length > 1 ? { api } : {}), turns }));
    }),
  );
  const [chat, responses] = [ranked[apis.indexOf('chat')], ranked[apis.indexOf('responses')]];
  for (const thread of responses ?? []) {
    const base = chat?.find((other) => other.file === thread.file);
    if (base) run.profileComparison.push(compareSelfTime(base, thread, PROFILE_ROWS));
  }
  run.profile.push(...ranked.flat().map((thread) => ({ ...thread, functions: thread.functions.slice(0, PROFILE_ROWS), modules: thread.modules.slice(0, PROFILE_ROWS) })));
}

/** Lines of each profile ranking and comparison in the report. */
const PROFILE_ROWS = 25;

/** The cells of a baseline target (one process, one round), recorded. */
async function measureBaseline(run: Run, target: Target, origin: string, modes: (SessionMode | null)[], withStream: boolean): Promise<void> {
  for (const cell of await measureTarget(run, target, origin, modes, ['chat'], withStream)) recordCell(run, cell.setting, [cell.phases]);
}

/**
 * Measures a target at each concurrency (and session mode), through each of its APIs at the
 * same setting (see `measureApis`).
 */
async function measureTarget(
  run: Run,
  target: Target,
  origin: string,
  modes: (SessionMode | null)[],
  apis: Api[],
  withStream: boolean,
  start: Pick<CellSetting, 'workers' | 'round'> = {},
): Promise<MeasuredCell[]> {
  const cells: MeasuredCell[] = [];
  for (const mode of modes) {
    for (const connections of run.options.concurrency) cells.push(...(await measureApis(run, { target, mode, stream: false, connections, ...start }, apis, origin)));
  }
  if (withStream) {
    for (const connections of run.options.streamConcurrency) cells.push(...(await measureApis(run, { target, mode: modes[0] ?? null, stream: true, connections, ...start }, apis, origin)));
  }
  return cells;
}

/**
 * Measures each API at one setting. With two, each is measured in two halves of the cell's
 * time, in the order A B B A: the database grows through a run, and measured one after the
 * other, the API measured second paid for it (PGlite at 128 connections, the same tree: a
 * Responses API turn cost a median 1.24 times a chat turn's CPU over four runs with chat
 * first, 1.04 times over two with it second).
 */
async function measureApis(run: Run, setting: Omit<CellSetting, 'api'>, apis: Api[], origin: string): Promise<MeasuredCell[]> {
  const order = apis.length > 1 ? [...apis, ...[...apis].reverse()] : apis;
  const halves = order.length / apis.length;
  // One exchange per API for both its halves: a client's chain of responses goes on in the second.
  const exchanges = new Map(apis.map((api) => [api, exchangeOf(run, { ...setting, api })]));
  const phases = new Map<Api, MeasuredPhase[]>(apis.map((api) => [api, []]));
  const size: PhaseSize = {
    // Each worker process compiles its own hot code: every worker gets as many warm-up requests as one process does.
    warmup: run.options.warmup * (setting.workers ?? 1),
    durationMs: run.options.durationMs / halves,
    requests: run.options.requests === undefined ? undefined : Math.ceil(run.options.requests / halves),
  };
  for (const api of order) phases.get(api)!.push(await measurePhase(run, { ...setting, api }, origin, exchanges.get(api)!, size));
  const cells = apis.map((api) => ({ setting: { ...setting, api }, phases: phases.get(api)! }));
  for (const cell of cells) printCell(`${cellLabel(cell.setting)}${setting.round !== undefined && run.options.rounds > 1 ? ` round ${setting.round}` : ''}`, summariseCell(cell.phases));
  return cells;
}

/**
 * Drives a service just started through each of its APIs for one cell's time, unmeasured, at
 * the highest concurrency. Without it the first cell after a start ran 10–25% slower than the
 * same cell later, whatever its API, while the hot code was still being compiled: a ratio of
 * two APIs compared a cold one with a warm one.
 */
async function warmUp(run: Run, target: Target, origin: string, apis: Api[], round: number, workers?: number): Promise<void> {
  const connections = Math.max(...run.options.concurrency);
  for (const api of apis) {
    const exchange = exchangeOf(run, { target, api, mode: run.options.modes[0] ?? null, stream: false, connections, workers, round, warmUp: true });
    const result = await runLoad({ origin, connections, warmup: 0, durationMs: run.options.durationMs, requests: run.options.requests, exchange });
    if (result.errors > 0) run.notes.push(`${target} ${api} warm-up: ${result.errors} errors, e.g. ${result.errorSamples[0]}`);
  }
}

/**
 * What one cell measures (or, with `warmUp`, drives unmeasured before the first cell: its
 * sessions are its own), and in which of a service's rounds (each round's sessions are its own).
 */
type CellSetting = {
  target: Target;
  api: Api;
  mode: SessionMode | null;
  stream: boolean;
  connections: number;
  workers?: number;
  round?: number;
  warmUp?: boolean;
  /** Set in the cells of the scenarios measured against the floor. */
  scenario?: SessionScenario;
};

/** A cell as one round measured it, in phases. */
type MeasuredCell = { setting: CellSetting; phases: MeasuredPhase[] };

/**
 * The requests of a cell. Chat completions: one session per client named in `X-Session-ID`
 * (session, pooled), sending the new user message with the system prompt. The Responses
 * API: each client chains its own responses with `previous_response_id` (session, pooled),
 * or sends none (new).
 */
function exchangeOf(run: Run, { target, api, mode, stream, connections, workers, round, warmUp }: CellSetting): Exchange {
  const continued = mode === 'session' || mode === 'pooled';
  // Named by the cell so that no two cells share a session or an idempotency key.
  const prefix = `bench-${run.stamp}${round !== undefined ? `-r${round}` : ''}${warmUp ? '-warm-up' : ''}-${target}${workers !== undefined ? `-w${workers}` : ''}-${api}-${stream ? 'stream' : 'json'}-c${connections}`;
  const keyed = run.options.idempotencyKeys && isService(target);
  const withKey = (headers: Record<string, string>, worker: number, seq: number) => (keyed ? { ...headers, 'idempotency-key': `${prefix}-${worker}-${seq}` } : headers);
  if (api === 'responses') {
    const headers = { 'content-type': 'application/json' };
    return (stream ? responsesStreamExchange : responsesExchange)(responsesBodies(stream), (worker, seq) => withKey(headers, worker, seq), continued);
  }
  const headers = Array.from({ length: connections }, (_, worker) => ({
    'content-type': 'application/json',
    ...(continued ? { 'x-session-id': `${prefix}-${worker}` } : {}),
  }));
  return (stream ? streamExchange : jsonExchange)(chatBodies(stream, run.options.toolTurns && isService(target)), (worker, seq) => withKey(headers[worker]!, worker, seq));
}

/** A deployment file whose one tool server is server-everything over stdio (`--tool-turns`); returns its path. */
async function toolServerFile(run: Run): Promise<string> {
  const path = join(run.tmp, 'tool-server.yaml');
  const entry = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
  await writeFile(path, `mcp_servers:\n  everything:\n    transport: stdio\n    command: ${JSON.stringify(process.execPath)}\n    args: [${JSON.stringify(entry)}, stdio]\n`);
  return path;
}

/** A phase of a cell as measured: its requests, and the cores each process used meanwhile. */
type MeasuredPhase = { load: LoadPhase; cpu: CpuUsage };

/** The label of a cell in the bench's progress lines. */
function cellLabel({ target, api, mode, stream, connections, workers, scenario }: CellSetting): string {
  return `${scenario ? `${scenario} ` : ''}${target}${workers !== undefined ? ` ${workerCount(workers)}` : ''}${api === 'responses' ? ' responses' : ''}${mode ? ` ${mode}` : ''}${stream ? ' stream' : ''} c=${connections}`;
}

/** How much a measured phase loads: warm-up requests, then a window of a duration or of a number of requests. */
type PhaseSize = { warmup: number; durationMs: number; requests: number | undefined };

/** Measures a phase of a cell, after its warm-up requests, once the machine is quiet. */
async function measurePhase(run: Run, setting: CellSetting, origin: string, exchange: Exchange, size: PhaseSize): Promise<MeasuredPhase> {
  if (run.options.quietWaitMs > 0) {
    const foreign = await waitForQuiet(watched, QUIET_CORES, run.options.quietWaitMs);
    if (foreign >= QUIET_CORES) console.error(`  ${cellLabel(setting)}: other processes and steal still take ${foreign.toFixed(2)} cores; measuring anyway`);
  }
  let watch: { stop: () => CpuUsage } | undefined;
  let cpu: CpuUsage | undefined;
  const load = await runLoadPhase({
    origin,
    connections: setting.connections,
    sharedConnections: setting.mode === 'pooled',
    ...size,
    exchange,
    onMeasureStart: () => (watch = watchCpu(watched)),
    onMeasureEnd: () => (cpu = watch!.stop()),
  });
  return { load, cpu: cpu! };
}

/** A cell's requests and cores over some of its phases. */
function summariseCell(phases: MeasuredPhase[]): { result: LoadResult; cpu: CpuUsage } {
  return {
    result: summariseLoad(phases.map((phase) => phase.load)),
    cpu: averageCpu(phases.map((phase) => ({ usage: phase.cpu, seconds: phase.load.elapsedMs / 1000 }))),
  };
}

/** Records a cell measured in one or more rounds, each in phases; prints its line when it adds several rounds up. */
function recordCell(run: Run, setting: CellSetting, rounds: MeasuredPhase[][]): void {
  const { target, api, mode, stream, connections, workers, scenario } = setting;
  const { result, cpu } = summariseCell(rounds.flat());
  const byRound = rounds.length > 1 ? { rounds: rounds.map(summariseCell).map((round) => ({ rps: round.result.rps, cpu: round.cpu })) } : {};
  const cell = { target, api, mode, stream, connections, result, cpu, flagged: result.errors > 0, noisy: cpu.foreign + cpu.steal >= QUIET_CORES, ...byRound, ...(scenario ? { scenario } : {}) };
  run.cells.push(workers !== undefined ? { ...cell, workers } : cell);
  if (rounds.length > 1) printCell(`${cellLabel(setting)}, ${rounds.length} rounds`, { result, cpu });
}

/** The progress line of a cell. */
function printCell(label: string, { result, cpu }: { result: LoadResult; cpu: CpuUsage }): void {
  const first = result.firstPiece ? ` first p50 ${result.firstPiece.p50.toFixed(2)} ms` : '';
  const cores = Object.entries(cpu.byProcess).map(([name, used]) => `${name} ${used.toFixed(2)}`).join(', ');
  console.error(
    `  ${label}: ${result.rps.toFixed(0)} req/s, p50 ${result.latency.p50.toFixed(2)} ms, p99 ${result.latency.p99.toFixed(2)} ms${first}, ${result.errors} errors; cores: ${cores}, other ${cpu.foreign.toFixed(2)}, steal ${cpu.steal.toFixed(2)}`,
  );
}

/** Stops a child and notes it when it died during the run or printed anything (the service logs only warnings and errors). */
async function stopChecked(run: Run, child: RunningChild): Promise<void> {
  if (child.process.exitCode !== null || child.process.signalCode !== null) {
    run.notes.push(`${child.name} exited during the run (code ${child.process.exitCode}, signal ${child.process.signalCode}); last output: ${child.tail().slice(-5).join(' / ')}`);
  }
  const printed = child.lines();
  await child.stop();
  if (child.name.startsWith('service') && printed > 0) {
    run.notes.push(`${child.name} printed ${printed} lines at warn level or above, the last: ${child.tail().slice(-3).join(' / ')}`);
  }
}

const workerCount = (workers: number) => `${workers} worker${workers === 1 ? '' : 's'}`;

let interrupted = false;
process.once('SIGINT', () => {
  interrupted = true;
  console.error('\ninterrupted: stopping the processes under test');
  void runCleanups().finally(() => process.exit(130));
});

main()
  .then(runCleanups)
  .then(() => process.exit(0))
  .catch(async (error: unknown) => {
    if (interrupted) return; // the SIGINT handler cleans up and exits
    console.error(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    await runCleanups();
    process.exit(1);
  });
