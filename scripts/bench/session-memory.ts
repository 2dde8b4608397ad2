import { runScript } from './child-process.js';
import type { MemoryReading, SessionMemoryProbeResult } from './session-memory-probe.js';
import type { Section } from './table.js';

/** The session-memory scenario's runs: one with the cache holding every session, one going past the cache bound. */
export type SessionMemoryReport = { runs: SessionMemoryProbeResult[] };

/** Bytes per cached idle session the issue asks to stay under. */
const GOAL_BYTES = 10 * 1024;
/** Heap growth past the cache bound still counted as flat (measurement noise, V8's own caches). */
const FLAT_GROWTH = 0.05;
/** Turns of each session in the run with conversations: more than `memory.short_term_turns` / 2, so a turn's context holds a full history. */
const CONVERSATION_TURNS = 12;

/**
 * Measures the heap held by cached idle sessions, each run in its own process (with
 * `--expose-gc`): `sessions` new sessions of one turn with the cache large enough for all
 * of them, read at `cacheBound` and at `sessions`; the same number with the cache bounded
 * to `cacheBound`, read at the bound, half-way and at the end; and fewer sessions (1 in 50)
 * of several turns each, since a cached actor keeps its last turn's working context.
 */
export async function measureSessionMemory(settings: { sessions: number; cacheBound: number }, llmUrl: string, root: string): Promise<SessionMemoryReport> {
  const { sessions, cacheBound } = settings;
  const conversations = Math.max(200, Math.round(sessions / 50));
  const probes = [{ cacheSize: sessions, sessions, turns: 1, checkpoints: [Math.min(cacheBound, sessions), sessions] }];
  if (cacheBound < sessions) probes.push({ cacheSize: cacheBound, sessions, turns: 1, checkpoints: [cacheBound, Math.round(sessions / 2), sessions] });
  probes.push({ cacheSize: conversations, sessions: conversations, turns: CONVERSATION_TURNS, checkpoints: [conversations] });
  const runs: SessionMemoryProbeResult[] = [];
  for (const probe of probes) {
    console.error(`session memory: ${probe.sessions} sessions of ${probe.turns} turn(s), cache_size ${probe.cacheSize}`);
    runs.push(
      await runScript<SessionMemoryProbeResult>({
        name: 'session-memory probe',
        script: 'dist/scripts/bench/session-memory-probe.js',
        nodeArgs: ['--expose-gc'],
        args: [
          ['--llm', `${llmUrl}/v1`],
          ['--sessions', String(probe.sessions)],
          ['--turns', String(probe.turns)],
          ['--cache-size', String(probe.cacheSize)],
          ['--checkpoints', probe.checkpoints.join(',')],
        ].flat(),
        cwd: root,
      }),
    );
  }
  return { runs };
}

/** The report section: the heap at each reading, bytes per cached session, and the goals. */
export function sessionMemorySection(report: SessionMemoryReport): Section {
  const headers = ['cache_size', 'reading', 'turns', 'sessions', 'cached', 'heap MB', '+heap MB', 'bytes/cached', 'rss MB', 'external MB'];
  const rows: string[][] = [];
  const lines: string[] = [];
  for (const run of report.runs) {
    const row = (label: string, reading: MemoryReading) => {
      const added = reading.heapUsed - run.baseline.heapUsed;
      return [
        String(run.cacheSize),
        label,
        String(run.turns),
        String(reading.sessions),
        String(reading.cachedActors),
        mb(reading.heapUsed),
        mb(added),
        reading.cachedActors > 0 ? (added / reading.cachedActors).toFixed(0) : '-',
        mb(reading.rss),
        mb(reading.external),
      ];
    };
    rows.push(row('baseline', run.baseline), ...run.checkpoints.map((reading) => row('filled', reading)), row('all evicted', run.afterEviction));
    lines.push(...goalLines(run));
    const turns = run.sessions * run.turns;
    lines.push(
      `cache_size ${run.cacheSize}: ${run.sessions} sessions of ${run.turns} turn(s) filled in ${(run.fillMs / 1000).toFixed(0)} s (${(run.fillMs / turns).toFixed(2)} ms per turn, ${run.concurrency} sessions at once)`,
    );
  }
  lines.push(
    'bytes/cached = (heap after GC with the sessions cached - heap after GC at the baseline) / cached actors; the baseline follows 200 warm-up sessions, evicted',
    'external is mostly the embedded database (PGlite WebAssembly memory), which holds the stored sessions and turns, not the cache',
  );
  return { title: 'Memory per cached idle session (the supervisor with the default graph, stores on PGlite in memory)', table: { headers, rows }, lines };
}

function goalLines(run: SessionMemoryProbeResult): string[] {
  const added = (reading: MemoryReading) => reading.heapUsed - run.baseline.heapUsed;
  if (run.cacheSize >= run.sessions) {
    return run.checkpoints.map((reading) => {
      const perSession = added(reading) / reading.cachedActors;
      return `${perSession < GOAL_BYTES ? 'MET ' : 'MISS'} ${reading.cachedActors} cached sessions of ${run.turns} turn(s): ${(perSession / 1024).toFixed(2)} KB each (goal < 10 KB)`;
    });
  }
  const atBound = run.checkpoints[0]!;
  const last = run.checkpoints.at(-1)!;
  const growth = (last.heapUsed - atBound.heapUsed) / added(atBound);
  return [
    `${growth < FLAT_GROWTH ? 'MET ' : 'MISS'} heap past the bound of ${run.cacheSize}: ${mb(atBound.heapUsed)} MB at ${atBound.sessions} sessions, ${mb(last.heapUsed)} MB at ${last.sessions} (${signedPercent(growth)} of what the cache adds; goal flat, < ${100 * FLAT_GROWTH}%)`,
  ];
}

const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
const signedPercent = (ratio: number) => `${ratio >= 0 ? '+' : ''}${(100 * ratio).toFixed(1)}%`;
