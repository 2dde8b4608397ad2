import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { chatBodies } from './chat-body.js';
import { freePort, runScript, startChild } from './child-process.js';
import { addCleanup } from './cleanup.js';
import { median } from './latency-stats.js';
import { jsonExchange, runLoad } from './load.js';
import { SERVICE_SCRIPT, startNodeFlags } from './start-command.js';
import type { PgliteMemoryProbeResult } from './pglite-memory-probe.js';
import { DEFAULT_SHARED_BUFFERS_MB, embeddedStartParams } from '../../storage/create-database.js';
import { createScratchDatabase } from './scratch-database.js';
import type { Section } from './table.js';

/** One start of the service as `npm start` runs it (plain node on the compiled code), measured from the spawn. */
export type StartReading = {
  /** From the spawn to the first `GET /health` answered 200. */
  readyMs: number;
  /** Resident memory of the service process after `REST_MS` with no traffic. */
  rssAtRest: number;
  /** The most it was resident up to then (VmHWM): the start-up's peak. */
  rssPeak: number;
};

/** The starts of one case, and what the cached sessions cost on its database. */
export type StartCase = {
  name: string;
  database: 'pg' | 'pglite';
  /** Migrations and (PGlite) initdb included. */
  fresh: boolean;
  readings: StartReading[];
  goal: { readyMs: number; rssAtRest: number };
  cachedSessions?: { sessions: number; rssBefore: number; rssAfter: number; fillMs: number };
};

/**
 * The floor of the service's start on a database: the least a process of the same stack does
 * before it answers (scripts/bench/start-floor.ts), timed as the service is, from the spawn
 * to its first `GET /health` answered 200.
 */
export type FloorCase = { name: string; database: 'pg' | 'pglite'; fresh: boolean; readyMs: number[] };

/** The start-up scenario's readings; `command` is how each start ran the service. */
export type StartUpReport = { command: string; cases: StartCase[]; floors: FloorCase[]; pglite: PgliteMemoryProbeResult[]; notes: string[] };

/**
 * How long the service stays idle after it is ready before its memory is read: the work
 * left to the background ends in it, and V8's memory reducer, which gives back the heap
 * the start grew about 10 s after it, has run.
 */
const REST_MS = 15_000;
const MB = 1024 * 1024;
/** The issue's goals, per case. */
const GOALS = {
  pg: { readyMs: 1_500, rssAtRest: 150 * MB },
  pgliteExisting: { readyMs: 2_500, rssAtRest: 300 * MB },
  pgliteFresh: { readyMs: 5_000, rssAtRest: 300 * MB },
};
/**
 * The issue's goals against the floor: the service ready on PostgreSQL within 3 times the
 * floor (Express + `pg` connected), on a new PGlite folder within 1.3 times PGlite opened
 * bare on a new folder; none for an existing folder.
 */
const FLOOR_GOALS = { pg: 3, pgliteFresh: 1.3 };
/** The shared buffers the PGlite probe compares, in MB (the service's default, PGlite's own, and around them). */
const SHARED_BUFFERS_MB = [1, 16, 32, 128];

/**
 * Starts the service `runs` times in each case (the PostgreSQL server with a new database
 * and with a migrated one, PGlite with a new folder and with an existing one), each from a
 * new process, and reads when it is ready and how much is resident at rest. Then, on each
 * database, fills the session cache with `cachedSessions` new sessions of one turn and
 * reads the memory again. Last, a probe of PGlite alone tells where its memory goes.
 */
export async function measureStartUp(settings: { runs: number; cachedSessions: number; dbUrl: string }, llmUrl: string, root: string, tmp: string): Promise<StartUpReport> {
  const notes: string[] = [];
  const cases: StartCase[] = [];
  const floors = await measureFloors(settings, root, tmp, notes);
  const base = { LLM_BASE_URL: `${llmUrl}/v1`, LOG_LEVEL: 'warn', LIMITS_REQUESTS_PER_MINUTE: '0', LIMITS_CONCURRENT_REQUESTS: '0' };
  const cacheEnv = { SESSIONS_CACHE_SIZE: String(settings.cachedSessions), SESSIONS_IDLE_MS: String(3_600_000) };

  // The PostgreSQL server: a new database per fresh start, then one migrated database for the rest.
  try {
    const fresh: StartReading[] = [];
    for (let run = 0; run < settings.runs; run += 1) {
      const database = await createScratchDatabase(settings.dbUrl);
      const unregister = addCleanup(database.drop);
      try {
        fresh.push((await startService(root, { ...base, DB_URL: database.url }, 0)).reading);
      } finally {
        unregister();
        await database.drop();
      }
    }
    cases.push({ name: 'PostgreSQL server, new database', database: 'pg', fresh: true, readings: fresh, goal: GOALS.pg });
    const database = await createScratchDatabase(settings.dbUrl);
    const unregister = addCleanup(database.drop);
    try {
      await startService(root, { ...base, DB_URL: database.url }, 0);
      cases.push(await existingCase('PostgreSQL server, migrated database', 'pg', root, { ...base, ...cacheEnv, DB_URL: database.url }, settings, GOALS.pg));
    } finally {
      unregister();
      await database.drop();
    }
  } catch (error) {
    notes.push(`PostgreSQL cases skipped: ${error instanceof Error ? error.message : String(error)}`);
  }

  // PGlite: a new folder per fresh start, then one existing folder.
  const fresh: StartReading[] = [];
  for (let run = 0; run < settings.runs; run += 1) fresh.push((await startService(root, { ...base, DB_URL: '', DATA_DIR: join(tmp, `start-fresh-${run}`) }, 0)).reading);
  cases.push({ name: 'embedded PGlite, new folder', database: 'pglite', fresh: true, readings: fresh, goal: GOALS.pgliteFresh });
  cases.push(await existingCase('embedded PGlite, existing folder', 'pglite', root, { ...base, ...cacheEnv, DB_URL: '', DATA_DIR: join(tmp, 'start-fresh-0') }, settings, GOALS.pgliteExisting));

  const pglite: PgliteMemoryProbeResult[] = [];
  for (const sharedBuffersMb of SHARED_BUFFERS_MB) {
    pglite.push(await probePglite(root, join(tmp, 'start-fresh-0'), sharedBuffersMb, false));
  }
  pglite.push(await probePglite(root, join(tmp, 'probe-initdb'), DEFAULT_SHARED_BUFFERS_MB, true));
  return { command: ['node', ...startNodeFlags(root), SERVICE_SCRIPT].join(' '), cases, floors, pglite, notes };
}

/**
 * Starts each floor `runs` times: Express and a `pg` pool connected to the PostgreSQL server,
 * PGlite opened on a new folder each time, then on the first of those folders again.
 */
async function measureFloors(settings: { runs: number; dbUrl: string }, root: string, tmp: string, notes: string[]): Promise<FloorCase[]> {
  const floors: FloorCase[] = [];
  const runs = Array.from({ length: settings.runs }, (_, run) => run);
  try {
    const readyMs: number[] = [];
    for (const _run of runs) readyMs.push(await startFloor(root, ['--db-url', settings.dbUrl]));
    floors.push({ name: 'Express + pg connected', database: 'pg', fresh: false, readyMs });
  } catch (error) {
    notes.push(`the PostgreSQL floor skipped: ${error instanceof Error ? error.message : String(error)}`);
  }
  const embedded = (dir: string) => ['--data-dir', dir, '--start-params', JSON.stringify(embeddedStartParams(DEFAULT_SHARED_BUFFERS_MB))];
  const fresh: number[] = [];
  for (const run of runs) fresh.push(await startFloor(root, embedded(join(tmp, `floor-fresh-${run}`))));
  floors.push({ name: 'PGlite opened on a new folder', database: 'pglite', fresh: true, readyMs: fresh });
  const existing: number[] = [];
  for (const _run of runs) existing.push(await startFloor(root, embedded(join(tmp, 'floor-fresh-0'))));
  floors.push({ name: 'PGlite opened on an existing folder', database: 'pglite', fresh: false, readyMs: existing });
  return floors;
}

/** One start of a floor: from the spawn to its first \`GET /health\` answered 200, polled as the service's is; stopped at once. */
async function startFloor(root: string, args: string[]): Promise<number> {
  const port = await freePort();
  const nodeArgs = startNodeFlags(root);
  const started = performance.now();
  const floor = await startChild({
    name: 'start-up floor',
    script: 'dist/scripts/bench/start-floor.js',
    nodeArgs,
    args: ['--port', String(port), ...args],
    cwd: root,
    ready: { probe: `http://127.0.0.1:${port}/health`, everyMs: 5 },
  });
  const readyMs = performance.now() - started;
  await floor.stop();
  return readyMs;
}

/** The floor a case of the service is read against: PostgreSQL's for both server cases, PGlite's on a new or an existing folder. */
function floorOf(report: StartUpReport, entry: StartCase): FloorCase | undefined {
  return report.floors.find((floor) => floor.database === entry.database && (entry.database === 'pg' || floor.fresh === entry.fresh));
}

/** The most a case's median ready time may be, in times its floor's median; undefined where the issue sets none. */
function floorGoalOf(entry: StartCase): number | undefined {
  if (entry.database === 'pg') return FLOOR_GOALS.pg;
  return entry.fresh ? FLOOR_GOALS.pgliteFresh : undefined;
}

/** The start-up goals against the floor, each case's median ready time against its floor's. */
export function startUpGoals(report: StartUpReport): string[] {
  return report.cases.flatMap((entry) => {
    const floor = floorOf(report, entry);
    const goal = floorGoalOf(entry);
    if (!floor || goal === undefined) return [];
    const ratio = median(entry.readings.map((reading) => reading.readyMs)) / median(floor.readyMs);
    return [`${ratio <= goal ? 'MET ' : 'MISS'} start-up ${entry.name}: ready ${ratio.toFixed(2)}x the floor (${floor.name}, ${median(floor.readyMs).toFixed(0)} ms) (goal <= ${goal}x)`];
  });
}

/** Starts on an existing database `runs` times; the last start also takes the cached sessions. */
async function existingCase(
  name: string,
  database: 'pg' | 'pglite',
  root: string,
  env: Record<string, string>,
  settings: { runs: number; cachedSessions: number },
  goal: StartCase['goal'],
): Promise<StartCase> {
  const readings: StartReading[] = [];
  let cachedSessions: StartCase['cachedSessions'];
  for (let run = 0; run < settings.runs; run += 1) {
    const last = run === settings.runs - 1;
    const service = await startService(root, env, last ? settings.cachedSessions : 0);
    readings.push(service.reading);
    cachedSessions = service.cachedSessions ?? cachedSessions;
  }
  return { name, database, fresh: false, readings, goal, ...(cachedSessions ? { cachedSessions } : {}) };
}

type MeasuredStart = { reading: StartReading; cachedSessions?: StartCase['cachedSessions'] };

/** One start: spawn, poll /health, rest, read the memory, optionally fill the cache, stop. */
async function startService(root: string, env: Record<string, string>, cachedSessions: number): Promise<MeasuredStart> {
  const port = await freePort();
  const nodeArgs = startNodeFlags(root);
  const started = performance.now();
  const service = await startChild({
    name: 'service',
    script: SERVICE_SCRIPT,
    nodeArgs,
    cwd: root,
    env: { ...process.env, ...env, APP_HOST: '127.0.0.1', APP_PORT: String(port) },
    ready: { probe: `http://127.0.0.1:${port}/health`, everyMs: 5 },
  });
  try {
    const readyMs = performance.now() - started;
    const pid = service.process.pid!;
    await sleep(REST_MS);
    const status = processStatus(pid);
    const reading = { readyMs, rssAtRest: status.rss, rssPeak: status.peak };
    if (cachedSessions === 0) return { reading };
    const fillStarted = performance.now();
    const headers = { 'content-type': 'application/json' };
    // No session named: each turn starts a new session, which stays cached (cache_size and idle_ms above).
    const result = await runLoad({ origin: service.url, connections: 16, warmup: 0, durationMs: 0, requests: cachedSessions, exchange: jsonExchange(chatBodies(false), () => headers) });
    if (result.errors > 0) throw new Error(`filling the cache: ${result.errors} errors, e.g. ${result.errorSamples[0]}`);
    const fillMs = performance.now() - fillStarted;
    await sleep(REST_MS);
    return { reading, cachedSessions: { sessions: result.ok, rssBefore: reading.rssAtRest, rssAfter: processStatus(pid).rss, fillMs } };
  } finally {
    await service.stop();
  }
}

/** VmRSS and VmHWM of a process, in bytes. */
function processStatus(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

function probePglite(root: string, dataDir: string, sharedBuffersMb: number, initdbHere: boolean): Promise<PgliteMemoryProbeResult> {
  return runScript<PgliteMemoryProbeResult>({
    name: 'PGlite memory probe',
    // Compiled, as the service runs: the tsx loader would add its own memory to the figures.
    script: 'dist/scripts/bench/pglite-memory-probe.js',
    nodeArgs: ['--expose-gc'],
    args: ['--data-dir', dataDir, '--shared-buffers-mb', String(sharedBuffersMb), ...(initdbHere ? ['--initdb-here'] : [])],
    cwd: root,
  });
}

const inMb = (bytes: number) => (bytes / MB).toFixed(0);

/** The report sections: start times and memory per case, the cached sessions, and PGlite's memory. */
export function startUpSections(report: StartUpReport): Section[] {
  const headers = ['case', 'starts', 'ready ms (median)', 'ready ms (max)', 'rss at rest MB (median)', 'peak MB (max)', 'goal', 'floor ready ms (median)', 'x floor', 'floor goal'];
  const rows = report.cases.map((entry) => {
    const ready = entry.readings.map((reading) => reading.readyMs);
    const floor = floorOf(report, entry);
    const ratio = floor ? median(ready) / median(floor.readyMs) : undefined;
    const floorGoal = floorGoalOf(entry);
    const rss = entry.readings.map((reading) => reading.rssAtRest);
    const met = median(ready) <= entry.goal.readyMs && median(rss) <= entry.goal.rssAtRest;
    return [
      entry.name,
      String(entry.readings.length),
      median(ready).toFixed(0),
      Math.max(...ready).toFixed(0),
      inMb(median(rss)),
      inMb(Math.max(...entry.readings.map((reading) => reading.rssPeak))),
      `${met ? 'MET' : 'MISS'} (≤ ${entry.goal.readyMs} ms, ≤ ${inMb(entry.goal.rssAtRest)} MB)`,
      floor ? median(floor.readyMs).toFixed(0) : '-',
      ratio === undefined ? '-' : `${ratio.toFixed(2)}x`,
      ratio === undefined || floorGoal === undefined ? '' : `${ratio <= floorGoal ? 'MET' : 'MISS'} (≤ ${floorGoal}x)`,
    ];
  });
  const lines = [
    `each start is \`${report.command}\` (what \`npm start\` runs, already compiled), timed from the spawn to the first \`GET /health\` answered 200 (polled every 5 ms); memory is the service process's VmRSS ${REST_MS / 1000} s later with no traffic`,
    `floor = the least a process of the same stack does before it answers /health, started and timed the same way (median of ${report.floors[0]?.readyMs.length ?? 0}): ${report.floors.map((floor) => `${floor.name} ${median(floor.readyMs).toFixed(0)} ms`).join(', ')}; the PostgreSQL cases are read against Express + pg connected, the PGlite ones against PGlite opened bare (PGlite.create with the service's start parameters) on a new or an existing folder`,
    ...report.notes,
  ];
  const sessions = report.cases.filter((entry) => entry.cachedSessions);
  const sessionRows = sessions.map(({ name, cachedSessions }) => {
    const { sessions: count, rssBefore, rssAfter, fillMs } = cachedSessions!;
    return [name, String(count), inMb(rssBefore), inMb(rssAfter), ((rssAfter - rssBefore) / count / 1024).toFixed(1), (fillMs / 1000).toFixed(1)];
  });
  const probeRows = report.pglite.map((probe) => [
    probe.initdbHere ? 'new folder, initdb in this process' : 'existing folder',
    String(probe.sharedBuffersMb),
    inMb(probe.rssLoaded),
    inMb(probe.rssOpen),
    inMb(probe.rssOpen - probe.rssLoaded),
    inMb(probe.wasmMemory),
    probe.wasmResident === undefined ? '-' : inMb(probe.wasmResident),
    inMb(probe.heapUsed),
    probe.openMs.toFixed(0),
  ]);
  return [
    { title: 'Start-up and memory at rest', table: { headers, rows }, lines },
    {
      title: 'Cached idle sessions, resident memory',
      table: { headers: ['database', 'sessions', 'rss before MB', 'rss after MB', 'KB per session', 'fill s'], rows: sessionRows },
      lines: [`new sessions of one chat completion turn each (no session named), 16 at a time, with sessions.cache_size as large and idle_ms an hour; rss read ${REST_MS / 1000} s after the last turn, without forcing a GC`],
    },
    {
      title: 'Where the embedded database\'s memory goes (PGlite alone, each line a new process)',
      table: { headers: ['case', 'shared_buffers MB', 'node + PGlite loaded MB', 'opened MB', 'PGlite MB', 'wasm memory MB', 'wasm resident MB', 'JS heap MB', 'open ms'], rows: probeRows },
      lines: [
        'opened = VmRSS after opening the folder with the service\'s settings (max_connections 8) and one query, after a GC; wasm memory is the size of PGlite\'s WebAssembly memory, wasm resident the part of it in RAM (its mapping in /proc/self/smaps)',
        'the rest of PGlite\'s share is its compiled WebAssembly code and the C library\'s and V8\'s own allocations',
      ],
    },
  ];
}
