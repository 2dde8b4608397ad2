import { execFileSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg, platform, release, totalmem } from 'node:os';
import { join } from 'node:path';
import type { SelfTimeComparison, SelfTimeReport } from './cpu-profile.js';
import { cpuPerRequestMs, serviceCpuMs, targetCores } from './cell-cpu.js';
import type { CellResult, RoundResult } from './cell-result.js';
import { median } from './latency-stats.js';
import type { BenchOptions, Target } from './options.js';
import { floorScenarioGoals, floorScenarioSections } from './scenario-report.js';
import { recallSection, type RecallReport } from './recall-latency.js';
import { sessionMemorySection, type SessionMemoryReport } from './session-memory.js';
import { startUpGoals, startUpSections, type StartUpReport } from './start-up.js';
import { markdownTable, ms, sectionMarkdown, sectionText, textTable, type Section, type Table } from './table.js';

/** Where the run happened. */
export type Machine = { cpuModel: string; cores: number; memoryGb: number; node: string; os: string; loadAverage: number[]; commit: string };

/** Everything a run produced, as written to bench-results/. */
export type BenchReport = {
  date: string;
  machine: Machine;
  options: Omit<BenchOptions, 'help'>;
  cells: CellResult[];
  goals: string[];
  notes: string[];
  profile?: SelfTimeReport[];
  /** Per thread of a service profiled through both APIs: where a Responses API turn spends its CPU against a chat turn. */
  profileComparison?: SelfTimeComparison[];
  sessionMemory?: SessionMemoryReport;
  recall?: RecallReport;
  startUp?: StartUpReport;
};

/** The machine the bench runs on: CPU, cores, memory, Node, OS, load at start, git commit. */
export function describeMachine(root: string): Machine {
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
  } catch {
    // Not a git checkout.
  }
  return {
    cpuModel: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGb: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    os: `${platform()} ${release()}`,
    loadAverage: loadavg().map((value) => Math.round(value * 100) / 100),
    commit,
  };
}

const LABELS: Record<Target, string> = {
  direct: 'direct LLM',
  passthrough: 'passthrough',
  persisted: 'persisted passthrough',
  pglite: 'service pglite',
  pg: 'service pg',
};
export const isService = (target: Target) => target === 'pglite' || target === 'pg';

/** A cell's target, with its API when the cells of the run are of more than one. */
function labelOf(cell: CellResult, cells: CellResult[]): string {
  return cells.some((other) => other.api !== 'chat') && isService(cell.target) ? `${LABELS[cell.target]} ${cell.api}` : LABELS[cell.target];
}

/** The chat completions cell of a target, streaming or not, at a concurrency. */
function find(cells: CellResult[], target: Target, stream: boolean, connections: number): CellResult | undefined {
  return cells.find((cell) => cell.target === target && cell.api === 'chat' && cell.stream === stream && cell.connections === connections);
}

/** The chat completions cell a Responses API cell compares with: same target, mode, streaming and concurrency. */
function chatTwin(cells: CellResult[], cell: CellResult): CellResult | undefined {
  return cells.find(
    (other) => other.api === 'chat' && other.target === cell.target && other.mode === cell.mode && other.stream === cell.stream && other.connections === cell.connections,
  );
}

/**
 * The goals of the turn path (issue 12), each from cells of this run: req/s at 128
 * connections at least the persisted pass-through's; at most 1.5 ms added to the p50 at one
 * connection; at 32 connections at most 1.0 ms of gateway CPU and 0.5 ms of PostgreSQL CPU a
 * turn; streaming at most 1.5 ms added to the first piece and 2 ms of CPU a stream; on PGlite
 * at 128 connections a p99 at most 5 times the p50; 4 workers no slower than one. And a turn
 * through the Responses API within 10% of the same turn through chat completions, in req/s
 * and in the service's CPU a turn. Then the targets of the scenarios against the floor (see
 * `floorScenarioGoals`) and of the start-up against its floor (`startUpGoals`).
 */
export function checkGoals(allCells: CellResult[], startUp?: StartUpReport): string[] {
  const goals: string[] = [];
  const goal = (met: boolean, text: string) => goals.push(`${met ? 'MET ' : 'MISS'} ${text}`);
  const all = throughputCells(allCells);
  const cells = all.filter((cell) => cell.api === 'chat');
  for (const cell of cells.filter((c) => isService(c.target) && !c.stream)) {
    const name = `${LABELS[cell.target]} (${cell.mode}) c=${cell.connections}`;
    const persisted = find(cells, 'persisted', false, cell.connections);
    if (persisted && cell.connections === 128) {
      const ratio = cell.result.rps / persisted.result.rps;
      goal(ratio >= 1, `${name}: req/s ${ratio.toFixed(2)}x the persisted pass-through (goal >= 1.0x, aim 1.3x)`);
    }
    const direct = find(cells, 'direct', false, cell.connections);
    if (direct && cell.connections === 1) {
      const added = cell.result.latency.p50 - direct.result.latency.p50;
      goal(added <= 1.5, `${name}: p50 +${added.toFixed(2)} ms over direct (goal <= 1.5 ms)`);
    }
    if (cell.connections === 32 && cell.mode === 'session') {
      const gateway = serviceCpuMs(cell);
      goal(gateway <= 1, `${name}: gateway CPU ${gateway.toFixed(2)} ms a turn (goal <= 1.0 ms)`);
      if (cell.target === 'pg') {
        const postgres = cpuPerRequestMs(cell, cell.cpu.byProcess.postgres ?? 0);
        goal(postgres <= 0.5, `${name}: PostgreSQL CPU ${postgres.toFixed(2)} ms a turn (goal <= 0.5 ms)`);
      }
    }
    if (cell.target === 'pglite' && cell.connections === 128) {
      const spread = cell.result.latency.p99 / cell.result.latency.p50;
      goal(spread <= 5, `${name}: p99 ${spread.toFixed(1)}x the p50 (goal <= 5x)`);
    }
  }
  for (const cell of cells.filter((c) => isService(c.target) && c.stream)) {
    const name = `${LABELS[cell.target]} stream c=${cell.connections}`;
    const direct = find(cells, 'direct', true, cell.connections);
    if (direct?.result.firstPiece && cell.result.firstPiece && cell.connections === 1) {
      const added = cell.result.firstPiece.p50 - direct.result.firstPiece.p50;
      goal(added <= 1.5, `${name}: first piece p50 +${added.toFixed(2)} ms over direct (goal <= 1.5 ms)`);
      const cpu = serviceCpuMs(cell);
      goal(cpu <= 2, `${name}: ${(1000 * cpu).toFixed(0)} µs of CPU a stream (goal <= 2,000 µs)`);
    }
  }
  for (const cell of all.filter((c) => c.api === 'responses')) {
    const chat = chatTwin(all, cell);
    if (!chat) continue;
    const name = `${LABELS[cell.target]} responses (${cell.mode})${cell.stream ? ' stream' : ''} c=${cell.connections}`;
    const { rps: rate, cpu, rounds } = judgedRatios(chat, cell);
    const over = rounds > 1 ? `, median of ${rounds} rounds` : '';
    goal(rate >= 0.9, `${name}: req/s ${percent(rate)} of chat completions' (goal >= 90%${over})`);
    goal(cpu <= 1.1, `${name}: service CPU a turn ${percent(cpu)} of chat completions' (goal <= 110%${over})`);
  }
  // With a connection per session (session) and with sessions sharing the connections (pooled).
  for (const cell of allCells.filter((c) => c.workers !== undefined && c.workers > 1 && c.mode !== 'new' && c.connections === 128)) {
    const one = allCells.find((other) => other.workers === 1 && other.mode === cell.mode && other.connections === 128);
    if (one) goal(cell.result.rps >= one.result.rps, `service pg ${cell.workers} workers (${cell.mode}) c=128: ${percent(cell.result.rps / one.result.rps)} of one worker's req/s (goal >= 100%)`);
  }
  return [...goals, ...floorScenarioGoals(allCells), ...(startUp ? startUpGoals(startUp) : [])];
}

/**
 * A Responses API cell's ratios to its chat twin in each round both were measured in
 * (responses / chat): req/s and the service's CPU a turn. Empty with one round.
 */
export function roundRatios(chat: CellResult, responses: CellResult): Array<{ rps: number; cpu: number }> {
  const pairs = (responses.rounds ?? []).flatMap((round, index) => {
    const twin = chat.rounds?.[index];
    return twin ? [{ chat: twin, responses: round }] : [];
  });
  const cpuOf = (round: RoundResult) => serviceCpuMs({ target: chat.target, result: round, cpu: round.cpu });
  return pairs.map((pair) => ({ rps: pair.responses.rps / pair.chat.rps, cpu: cpuOf(pair.responses) / cpuOf(pair.chat) }));
}

/** Rounds from which a Responses API cell's goal is judged by the median of its rounds' ratios. */
const MEDIAN_ROUNDS = 3;

/**
 * The ratios (responses / chat) a Responses API cell's goal is judged by, and over how many
 * rounds: with MEDIAN_ROUNDS rounds or more, the median of the rounds' ratios; otherwise the
 * ratios of the cells' sums (`rounds` 1). This machine's speed moves by a third for seconds at
 * a time, and a spell falls in one API's halves of a round as often as in both: in the CPU
 * profiles of eight rounds, the code both APIs run alike (the state machine, the LLM client,
 * undici, the turn runner) cost 0.77 to 1.53 times as much a turn in the Responses API's halves
 * as in chat's of the same round. A sum weighs the round a spell fell in as much as the others
 * together; the median does not.
 */
export function judgedRatios(chat: CellResult, responses: CellResult): { rps: number; cpu: number; rounds: number } {
  const byRound = roundRatios(chat, responses);
  if (byRound.length >= MEDIAN_ROUNDS) return { ...medianRatios(byRound), rounds: byRound.length };
  return { rps: responses.result.rps / chat.result.rps, cpu: serviceCpuMs(responses) / serviceCpuMs(chat), rounds: 1 };
}

/** The median of rounds' ratios, each ratio apart. */
function medianRatios(byRound: Array<{ rps: number; cpu: number }>): { rps: number; cpu: number } {
  return { rps: median(byRound.map((round) => round.rps)), cpu: median(byRound.map((round) => round.cpu)) };
}

/** The cells of the throughput scenario (the workers scenario's have a worker count, the floor's scenarios' their name). */
const throughputCells = (cells: CellResult[]) => cells.filter((cell) => cell.workers === undefined && cell.scenario === undefined);

/** The workers scenario: the service on PostgreSQL with each worker count, compared with the fewest workers. */
function workersSection(allCells: CellResult[]): Section | undefined {
  const cells = allCells.filter((cell) => cell.workers !== undefined);
  if (cells.length === 0) return undefined;
  const fewest = Math.min(...cells.map((cell) => cell.workers!));
  const headers = ['workers', 'mode', 'conns', 'req/s', 'p50 ms', 'p99 ms', 'errors', `vs ${fewest} worker${fewest > 1 ? 's' : ''}`, ...CPU_HEADERS];
  const rows = cells.map((cell) => {
    const base = cells.find((other) => other.workers === fewest && other.mode === cell.mode && other.connections === cell.connections);
    return [
      String(cell.workers),
      cell.mode ?? '-',
      String(cell.connections),
      rps(cell),
      ms(cell.result.latency.p50),
      ms(cell.result.latency.p99),
      errors(cell),
      base && base !== cell ? percent(cell.result.rps / base.result.rps) : '',
      ...cpuColumns(cell),
    ];
  });
  return {
    title: 'Service workers on the PostgreSQL server (APP_WORKERS; non-streaming; cores of the target = the primary and its workers)',
    table: { headers, rows },
    lines: [],
  };
}

/** The sections of the scenarios other than throughput, in the order they ran. */
function scenarioSections(report: BenchReport): Section[] {
  const sections = [workersSection(report.cells), ...floorScenarioSections(report.cells)];
  if (report.sessionMemory) sections.push(sessionMemorySection(report.sessionMemory));
  if (report.recall) sections.push(recallSection(report.recall));
  if (report.startUp) sections.push(...startUpSections(report.startUp));
  return sections.filter((section): section is Section => section !== undefined);
}

/** The Responses API's cells against chat completions' at the same target, mode, streaming and concurrency. */
function apiSection(allCells: CellResult[]): Section | undefined {
  const cells = throughputCells(allCells);
  const pairs = cells.filter((cell) => cell.api === 'responses').flatMap((cell) => {
    const chat = chatTwin(cells, cell);
    return chat ? [{ chat, responses: cell }] : [];
  });
  if (pairs.length === 0) return undefined;
  const headers = [
    'target',
    'mode',
    'conns',
    'req/s chat',
    'req/s responses',
    'req/s ratio',
    'p50 chat',
    'p50 responses',
    'p99 chat',
    'p99 responses',
    'cpu ms/turn chat',
    'cpu ms/turn responses',
    'cpu ratio',
    'pg cpu ms/turn chat',
    'pg cpu ms/turn responses',
  ];
  const rounds = pairs.some(({ responses }) => responses.rounds !== undefined);
  if (rounds) headers.push('req/s ratio, median of rounds', 'cpu ratio, median of rounds', 'req/s ratio by round', 'cpu ratio by round');
  const rows = pairs.map(({ chat, responses }) => {
    const postgresCpu = (cell: CellResult) => cpuPerRequestMs(cell, cell.cpu.byProcess.postgres ?? 0);
    const [chatCpu, responsesCpu, chatPg, responsesPg] = [serviceCpuMs(chat), serviceCpuMs(responses), postgresCpu(chat), postgresCpu(responses)];
    const byRound = roundRatios(chat, responses);
    const medians = medianRatios(byRound);
    const listed = (ratios: number[]) => ratios.map((value) => value.toFixed(2)).join(' ');
    const hasPg = chat.target === 'pg';
    return [
      LABELS[chat.target],
      `${chat.mode ?? '-'}${chat.stream ? ' stream' : ''}`,
      String(chat.connections),
      rps(chat),
      rps(responses),
      ratio(responses.result.rps / chat.result.rps),
      ms(chat.result.latency.p50),
      ms(responses.result.latency.p50),
      ms(chat.result.latency.p99),
      ms(responses.result.latency.p99),
      chatCpu.toFixed(2),
      responsesCpu.toFixed(2),
      ratio(responsesCpu / chatCpu),
      hasPg ? chatPg.toFixed(2) : '',
      hasPg ? responsesPg.toFixed(2) : '',
      ...(rounds
        ? [
            byRound.length > 0 ? ratio(medians.rps) : '',
            byRound.length > 0 ? ratio(medians.cpu) : '',
            listed(byRound.map((round) => round.rps)),
            listed(byRound.map((round) => round.cpu)),
          ]
        : []),
    ];
  });
  return {
    title: 'Responses API against chat completions (same target, mode and connections, same run; ratio = responses / chat; cpu = the service process)',
    table: { headers, rows },
    lines: [
      'Each API was measured in two halves of the cell time, in the order of --apis and back (A B B A) at each setting, its halves added together: a later cell runs on a larger database.',
      ...(rounds
        ? [
            'With --rounds, the service was started afresh for each round, which measured every cell: a cell and its ratios add all rounds up; the last columns give the median of the rounds\' ratios and each round\'s.',
          ]
        : []),
      `A turn through /v1/responses is meant to cost within 10% of the same turn through chat completions: req/s ratio >= 0.90, cpu ratio <= 1.10 (with ${MEDIAN_ROUNDS} rounds or more, the median of the rounds' ratios: the machine's speed swings for seconds at a time, and a sum weighs the round a slow spell fell in as much as the rest).`,
    ],
  };
}

function nonStreamingTable(cells: CellResult[]): Table {
  const headers = ['target', 'mode', 'conns', 'req/s', 'p50 ms', 'p99 ms', 'errors', 'vs direct', 'vs passthrough', 'vs persisted', '+p50 ms', ...CPU_HEADERS];
  const rows = cells
    .filter((cell) => !cell.stream)
    .map((cell) => {
      const { result } = cell;
      const direct = cell.target === 'direct' ? undefined : find(cells, 'direct', false, cell.connections);
      const pass = isService(cell.target) || cell.target === 'persisted' ? find(cells, 'passthrough', false, cell.connections) : undefined;
      const persisted = isService(cell.target) ? find(cells, 'persisted', false, cell.connections) : undefined;
      return [
        labelOf(cell, cells),
        cell.mode ?? '-',
        String(cell.connections),
        rps(cell),
        ms(result.latency.p50),
        ms(result.latency.p99),
        errors(cell),
        direct ? percent(result.rps / direct.result.rps) : '',
        pass ? percent(result.rps / pass.result.rps) : '',
        persisted ? percent(result.rps / persisted.result.rps) : '',
        direct ? signed(result.latency.p50 - direct.result.latency.p50) : '',
        ...cpuColumns(cell),
      ];
    });
  return { headers, rows };
}

function streamingTable(cells: CellResult[]): Table {
  const headers = ['target', 'conns', 'req/s', 'first p50', 'first p99', 'total p50', 'total p99', 'errors', 'vs direct', '+first p50', ...CPU_HEADERS];
  const rows = cells
    .filter((cell) => cell.stream)
    .map((cell) => {
      const { result } = cell;
      const direct = cell.target === 'direct' ? undefined : find(cells, 'direct', true, cell.connections);
      const first = result.firstPiece;
      return [
        labelOf(cell, cells),
        String(cell.connections),
        rps(cell),
        ms(first?.p50),
        ms(first?.p99),
        ms(result.latency.p50),
        ms(result.latency.p99),
        errors(cell),
        direct ? percent(result.rps / direct.result.rps) : '',
        direct?.result.firstPiece && first ? signed(first.p50 - direct.result.firstPiece.p50) : '',
        ...cpuColumns(cell),
      ];
    });
  return { headers, rows };
}

const CPU_HEADERS = ['cores bench/target/llm/pg', 'other', 'steal', 'target cpu ms/req', 'pg cpu ms/req'];

/**
 * Cores used by the load generator, the process under test (the LLM itself for direct), the LLM,
 * the PostgreSQL server, others and the hypervisor; and the target's CPU time per request, which
 * noise from other processes changes much less than req/s.
 */
function cpuColumns(cell: CellResult): string[] {
  const { bench = 0, 'fake LLM': llm = 0, postgres = 0 } = cell.cpu.byProcess;
  const target = targetCores(cell);
  const perRequest = (cores: number) => (cell.result.rps > 0 ? cpuPerRequestMs(cell, cores).toFixed(2) : '-');
  return [
    [bench, target, llm, postgres].map((used) => used.toFixed(2)).join('/'),
    cell.cpu.foreign.toFixed(2),
    cell.cpu.steal.toFixed(2),
    perRequest(target),
    postgres > 0 ? perRequest(postgres) : '',
  ];
}

const rps = (cell: CellResult) => `${cell.noisy ? '~' : ''}${cell.result.rps.toFixed(0)}`;
const signed = (value: number) => `${value >= 0 ? '+' : ''}${value.toFixed(2)}`;
const percent = (ratio: number) => `${(100 * ratio).toFixed(0)}%`;
const ratio = (value: number) => (Number.isFinite(value) ? `${value.toFixed(2)}x` : '-');
const errors = (cell: CellResult) => (cell.flagged ? `${cell.result.errors} !!` : '0');

function profileLines(profile: SelfTimeReport): string[] {
  const busy = profile.totalMs - profile.idleMs;
  const cells = profile.api ? ` (${profile.api} cells)` : '';
  const perTurn = profile.turns ? `, ${profile.turns} turns, busy ${((1000 * busy) / profile.turns).toFixed(0)} µs a turn` : '';
  return [
    `${profile.file}${cells}: ${profile.windowed ? 'measured window only' : 'whole process life (start-up included)'}, sampled ${profile.totalMs.toFixed(0)} ms, idle ${profile.idleMs.toFixed(0)} ms, busy ${busy.toFixed(0)} ms${perTurn}`,
    '',
    'self ms   %busy  function  file:line:column (of the transpiled code: tsx puts each project file on one line)',
    ...profile.functions.map((e) => `${e.ms.toFixed(0).padStart(7)}  ${e.percent.toFixed(1).padStart(5)}%  ${e.name}  ${e.where}`),
    '',
    'self ms   %busy  package / file',
    ...profile.modules.map((e) => `${e.ms.toFixed(0).padStart(7)}  ${e.percent.toFixed(1).padStart(5)}%  ${e.name}`),
  ];
}

function comparisonLines(comparison: SelfTimeComparison): string[] {
  const { base, other } = comparison;
  const row = (e: SelfTimeComparison['functions'][number]) =>
    `${e.baseUs.toFixed(1).padStart(8)} ${e.otherUs.toFixed(1).padStart(9)} ${signed(e.otherUs - e.baseUs).padStart(8)}  ${e.name}${e.where ? `  ${e.where}` : ''}`;
  const head = `${(base.api ?? 'base').padStart(8)} ${(other.api ?? 'other').padStart(9)} ${'delta'.padStart(8)}`;
  return [
    `${comparison.file}: busy ${base.busyUsPerTurn.toFixed(0)} µs a turn (${base.api}, ${base.turns} turns) against ${other.busyUsPerTurn.toFixed(0)} µs (${other.api}, ${other.turns} turns), ${signed(other.busyUsPerTurn - base.busyUsPerTurn)} µs`,
    '',
    `${head}  self µs a turn by function, largest growth first, then the largest falls`,
    ...comparison.functions.map(row),
    '',
    `${head}  self µs a turn by package / file`,
    ...comparison.modules.map(row),
  ];
}

function noisyLine(cells: CellResult[]): string[] {
  const noisy = cells.filter((cell) => cell.noisy);
  if (noisy.length === 0) return [];
  return [`~ ${noisy.length} cell(s) ran while other processes and the hypervisor took >= 0.2 cores ('other' + 'steal'): their figures are low`];
}

function errorLines(cells: CellResult[]): string[] {
  return cells
    .filter((cell) => cell.flagged)
    .map((cell) => `${cell.scenario ? `${cell.scenario}: ` : ''}${labelOf(cell, cells)}${cell.workers ? ` ${cell.workers} workers` : ''} ${cell.mode ?? ''} ${cell.stream ? 'stream ' : ''}c=${cell.connections}: ${cell.result.errors} errors, e.g. ${cell.result.errorSamples.join(' | ')}`);
}

/** The readable report printed on stdout. */
export function renderText(report: BenchReport): string {
  const { machine } = report;
  const cells = throughputCells(report.cells);
  const parts = [`svc-agent bench ${report.date} — ${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}, load ${machine.loadAverage.join(' ')}, commit ${machine.commit}`];
  if (cells.some((cell) => !cell.stream)) {
    parts.push('', 'Non-streaming (latency in ms; vs = req/s ratio at the same connections; +p50 = added over direct; cores used during the cell)', textTable(nonStreamingTable(cells)));
  }
  if (cells.some((cell) => cell.stream)) parts.push('', 'Streaming (first = first content piece, total = whole stream; ms)', textTable(streamingTable(cells)));
  const apis = apiSection(report.cells);
  if (apis) parts.push('', ...sectionText(apis));
  for (const section of scenarioSections(report)) parts.push('', ...sectionText(section));
  if (report.goals.length > 0) parts.push('', 'Goals', ...report.goals);
  const problems = errorLines(report.cells);
  if (problems.length > 0) parts.push('', 'Cells with errors (!!)', ...problems);
  const notes = [...noisyLine(report.cells), ...report.notes];
  if (notes.length > 0) parts.push('', 'Notes', ...notes);
  for (const profile of report.profile ?? []) parts.push('', 'CPU profile of the service', ...profileLines(profile));
  for (const comparison of report.profileComparison ?? []) parts.push('', 'CPU profile: a Responses API turn against a chat turn', ...comparisonLines(comparison));
  return parts.join('\n');
}

/** The same report as Markdown. */
export function renderMarkdown(report: BenchReport): string {
  const { machine } = report;
  const parts = [
    `# svc-agent bench ${report.date}`,
    '',
    `- Machine: ${machine.cpuModel}, ${machine.cores} cores, ${machine.memoryGb} GB, ${machine.os}, load average at start ${machine.loadAverage.join(' ')}`,
    `- Node ${machine.node}, commit ${machine.commit}`,
    `- Cells: ${report.options.requests !== undefined ? `${report.options.requests} requests` : `${report.options.durationMs / 1000} s`} after ${report.options.warmup} warm-up requests (per worker with workers); loopback, scripted LLM`,
  ];
  const cells = throughputCells(report.cells);
  if (cells.some((cell) => !cell.stream)) parts.push('', '## Non-streaming', '', markdownTable(nonStreamingTable(cells)));
  if (cells.some((cell) => cell.stream)) parts.push('', '## Streaming', '', markdownTable(streamingTable(cells)));
  const apis = apiSection(report.cells);
  if (apis) parts.push('', ...sectionMarkdown(apis));
  for (const section of scenarioSections(report)) parts.push('', ...sectionMarkdown(section));
  if (report.goals.length > 0) parts.push('', '## Goals', '', ...report.goals.map((goal) => `- ${goal}`));
  const problems = errorLines(report.cells);
  if (problems.length > 0) parts.push('', '## Cells with errors', '', ...problems.map((line) => `- ${line}`));
  const notes = [...noisyLine(report.cells), ...report.notes];
  if (notes.length > 0) parts.push('', '## Notes', '', ...notes.map((note) => `- ${note}`));
  for (const profile of report.profile ?? []) parts.push('', '## CPU profile of the service', '', '```', ...profileLines(profile), '```');
  for (const comparison of report.profileComparison ?? []) {
    parts.push('', '## CPU profile: a Responses API turn against a chat turn', '', '```', ...comparisonLines(comparison), '```');
  }
  return `${parts.join('\n')}\n`;
}

/** Writes `bench-<date>.json` and `.md` under `dir`; returns their paths. */
export async function writeReport(report: BenchReport, dir: string, stamp: string): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const json = join(dir, `bench-${stamp}.json`);
  const markdown = join(dir, `bench-${stamp}.md`);
  await writeFile(json, `${JSON.stringify(report, null, 2)}\n`);
  await writeFile(markdown, renderMarkdown(report));
  return [json, markdown];
}
