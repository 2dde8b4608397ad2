import pg from 'pg';
import { runScript } from './child-process.js';
import { addCleanup } from './cleanup.js';
import type { RecallProbeResult } from './recall-probe.js';
import { createScratchDatabase } from './scratch-database.js';
import { ms, type Section } from './table.js';

/** The recall scenario's runs (PGlite, and the PostgreSQL server when it has pgvector) and why one was left out. */
export type RecallReport = { runs: RecallProbeResult[]; notes: string[] };

/** The p99 the issue asks of a recall. */
const GOAL_P99_MS = 20;

/**
 * Times long-term recall over `memories` memories of one user, each database in its own
 * process: the embedded PGlite (with pgvector) always, and a scratch database on the
 * PostgreSQL server at `dbUrl` when the server offers the `vector` extension.
 */
export async function measureRecall(settings: { memories: number; queries: number; dbUrl: string }, root: string): Promise<RecallReport> {
  const report: RecallReport = { runs: [], notes: [] };
  const probe = (dbUrl: string) =>
    runScript<RecallProbeResult>({
      name: 'recall probe',
      script: 'dist/scripts/bench/recall-probe.js',
      args: ['--memories', String(settings.memories), '--queries', String(settings.queries), '--db-url', dbUrl],
      cwd: root,
    });
  console.error(`recall: ${settings.memories} memories on PGlite`);
  report.runs.push(await probe(''));
  const serverVector = await hasVectorExtension(settings.dbUrl);
  if (serverVector !== true) {
    report.notes.push(`recall on the PostgreSQL server skipped: ${serverVector}`);
    return report;
  }
  const database = await createScratchDatabase(settings.dbUrl);
  const unregister = addCleanup(database.drop);
  try {
    console.error(`recall: ${settings.memories} memories on PostgreSQL (${database.name})`);
    report.runs.push(await probe(database.url));
  } finally {
    unregister();
    await database.drop();
  }
  return report;
}

/** True when the server can create the `vector` extension; otherwise why not. */
async function hasVectorExtension(url: string): Promise<true | string> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  try {
    await client.connect();
    const { rows } = await client.query<{ present: boolean }>(`select exists (select 1 from pg_available_extensions where name = 'vector') as present`);
    return rows[0]?.present ? true : `the server at ${url} has no pgvector`;
  } catch (error) {
    return `the server at ${url} is not reachable (${error instanceof Error ? error.message : String(error)})`;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The report section: latency of each case, the goal, and the plan of each case. */
export function recallSection(report: RecallReport): Section {
  const headers = ['database', 'statistics', 'user memories', 'ef_search', 'consolidating', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms', 'exact top-k', 'plan'];
  const rows: string[][] = [];
  const lines: string[] = [];
  const plans: string[] = [];
  for (const run of report.runs) {
    for (const entry of run.cases) {
      const where = `${run.database}, ${entry.statistics}, a user with ${entry.userMemories} memories, ef_search ${entry.efSearch}${entry.writers ? `, ${entry.writers} workers consolidating` : ''}`;
      plans.push(`${where}:`, ...entry.plan.map((line) => `  ${line}`), '');
      const { latency } = entry;
      rows.push([
        run.database,
        entry.statistics,
        String(entry.userMemories),
        String(entry.efSearch),
        entry.writers ? `${entry.writers} workers, ${entry.writesPerSecond.toFixed(0)} memories/s` : 'none',
        ms(latency.p50),
        ms(latency.p95),
        ms(latency.p99),
        ms(latency.max),
        `${(100 * entry.exactShare).toFixed(0)}%`,
        planSummary(entry.plan),
      ]);
      const met = latency.p99 < GOAL_P99_MS;
      lines.push(`${met ? 'MET ' : 'MISS'} ${where}: recall p99 ${ms(latency.p99)} ms (goal < ${GOAL_P99_MS} ms)`);
    }
    lines.push(
      `${run.database}: ${run.memories} memories of one user (+ other users' few) stored in ${seconds(run.fillMs)} s, then the HNSW index built in ${seconds(run.indexBuildMs)} s; ${run.dimensions} dimensions, top ${run.results}; indexes: ${run.indexes.join('; ')}`,
    );
  }
  lines.push(...report.notes);
  return { title: 'Long-term recall latency (runtime/memory/vector-memory.ts recall: local embedding + search)', table: { headers, rows }, lines, preformatted: plans };
}

const seconds = (ms: number) => (ms / 1000).toFixed(0);

/** The plan's access path in a few words: the scan nodes, outermost first. */
function planSummary(plan: string[]): string {
  const scans = plan.map((line) => /(Index Scan using \S+|Bitmap Index Scan on \S+|Seq Scan on \S+)/.exec(line)?.[1]).filter(Boolean);
  const sorted = plan.some((line) => line.includes('Sort Method'));
  return `${scans.join(' > ')}${sorted ? ' + sort' : ''}`;
}
