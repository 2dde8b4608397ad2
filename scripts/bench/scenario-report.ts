import { cpuPerRequestMs, serviceCpuMs } from './cell-cpu.js';
import type { CellResult } from './cell-result.js';
import { HISTORY_MESSAGES, PACE_MS, PACED_WINDOW_MS, SESSION_SCENARIOS, SHORT_SESSION_TURNS, STREAM_CHUNKS, type SessionScenario } from './scenarios.js';
import { ms, type Section } from './table.js';

/** The targets of the scenarios against the floor, as the table names them. */
const NAMES: Record<string, string> = { direct: 'direct LLM', persisted: 'floor', pg: 'service, PostgreSQL', pglite: 'service, PGlite' };
const isService = (cell: CellResult) => cell.target === 'pg' || cell.target === 'pglite';

/** What each scenario measures, as its section's title. */
const TITLES: Record<SessionScenario, string> = {
  'short-sessions': `Short sessions: each client starts a new session every ${SHORT_SESSION_TURNS} turns (non-streaming; x floor = the target's figure / the floor's at the same connections)`,
  'long-sessions': `Long sessions: one session per connection, continued, each with ${HISTORY_MESSAGES} messages of history before the window (non-streaming; Δ = added to the LLM alone, sent the same conversation)`,
  streams: `Streams of ${STREAM_CHUNKS} chunks back to back: one session per connection with ${HISTORY_MESSAGES} messages of history (first = first content chunk; Δ = added to the LLM alone)`,
  'paced-streams': `Streams paced like a model: ${STREAM_CHUNKS} chunks ${PACE_MS} ms apart (about ${((STREAM_CHUNKS * PACE_MS) / 1000).toFixed(0)} s), all started at once, a session each; finished = streams answered in the ${PACED_WINDOW_MS / 1000} s window`,
};

/** The floor's cell (the persisted pass-through) in the same scenario at the same connections. */
function floorOf(cells: CellResult[], cell: CellResult): CellResult | undefined {
  return cells.find((other) => other.target === 'persisted' && other.scenario === cell.scenario && other.connections === cell.connections);
}

/** The LLM alone in the same scenario at the same connections. */
function directOf(cells: CellResult[], cell: CellResult): CellResult | undefined {
  return cells.find((other) => other.target === 'direct' && other.scenario === cell.scenario && other.connections === cell.connections);
}

/** What a cell adds to the LLM alone: to the p50 of a whole answer, or of the first chunk of a stream. */
function addedMs(cells: CellResult[], cell: CellResult): number | undefined {
  const direct = directOf(cells, cell);
  if (!direct || cell.target === 'direct') return undefined;
  const p50 = (of: CellResult) => (of.stream ? of.result.firstPiece?.p50 : of.result.latency.p50);
  const [own, alone] = [p50(cell), p50(direct)];
  return own === undefined || alone === undefined ? undefined : own - alone;
}

const cpuUs = (cell: CellResult) => 1000 * serviceCpuMs(cell);
const times = (value: number | undefined) => (value === undefined || !Number.isFinite(value) ? '' : `${value.toFixed(2)}x`);
const signed = (value: number | undefined) => (value === undefined ? '' : `${value >= 0 ? '+' : ''}${value.toFixed(2)}`);

/** The section of each scenario against the floor that the run measured, in the order of SESSION_SCENARIOS. */
export function floorScenarioSections(allCells: CellResult[]): Section[] {
  return SESSION_SCENARIOS.flatMap((scenario) => {
    const cells = allCells.filter((cell) => cell.scenario === scenario);
    return cells.length > 0 ? [scenarioSection(scenario, cells)] : [];
  });
}

function scenarioSection(scenario: SessionScenario, cells: CellResult[]): Section {
  const stream = cells.some((cell) => cell.stream);
  const headers = [
    'target',
    'conns',
    stream ? 'streams/s' : 'req/s',
    'x floor',
    'p50 ms',
    'p99 ms',
    'p99 x floor',
    ...(stream ? ['first p50', 'first p99', 'first p99 x floor'] : []),
    stream ? 'Δ first p50' : 'Δ p50',
    'finished',
    'errors',
    `target cpu µs/${stream ? 'stream' : 'turn'}`,
    'cpu x floor',
    'pg cpu µs',
  ];
  const rows = cells.map((cell) => {
    const floor = cell.target === 'persisted' || cell.target === 'direct' ? undefined : floorOf(cells, cell);
    const { result } = cell;
    const postgres = cell.cpu.byProcess.postgres ?? 0;
    return [
      NAMES[cell.target] ?? cell.target,
      String(cell.connections),
      `${cell.noisy ? '~' : ''}${result.rps.toFixed(0)}`,
      floor ? times(result.rps / floor.result.rps) : '',
      ms(result.latency.p50),
      ms(result.latency.p99),
      floor ? times(result.latency.p99 / floor.result.latency.p99) : '',
      ...(stream
        ? [ms(result.firstPiece?.p50), ms(result.firstPiece?.p99), floor?.result.firstPiece && result.firstPiece ? times(result.firstPiece.p99 / floor.result.firstPiece.p99) : '']
        : []),
      signed(addedMs(cells, cell)),
      String(result.ok),
      cell.flagged ? `${result.errors} !!` : '0',
      cpuUs(cell).toFixed(0),
      floor ? times(cpuUs(cell) / cpuUs(floor)) : '',
      cell.target === 'pg' || cell.target === 'persisted' ? (1000 * cpuPerRequestMs(cell, postgres)).toFixed(0) : '',
    ];
  });
  return {
    title: TITLES[scenario],
    table: { headers, rows },
    lines: [
      `floor = the persisted pass-through (Express 5 + undici + pg: the user's message committed before the LLM call and the reply before answering, a session's last ${HISTORY_MESSAGES} messages kept in memory and sent upstream); each target started afresh on a new database for the scenario`,
      'target cpu = the process under test (the LLM itself for direct LLM) a request; pg cpu = the PostgreSQL server\'s processes a request',
    ],
  };
}

/**
 * The targets of issue 45, each from cells of this run: short sessions at 128 connections at
 * least 0.9 of the floor's req/s, and p99 at most 1.5 times its (short and long sessions);
 * streams back to back at 16 at once at least 0.9 of its streams a second, and one at a time
 * at most 1.2 times its CPU a stream; one long session adding at most 0.5 ms more to the LLM's
 * p50 than the floor does; the paced streams' first chunk at p99 at most 1.5 times the floor's.
 */
export function floorScenarioGoals(allCells: CellResult[]): string[] {
  const goals: string[] = [];
  const goal = (met: boolean, text: string) => goals.push(`${met ? 'MET ' : 'MISS'} ${text}`);
  for (const cell of allCells.filter((c) => c.scenario !== undefined && isService(c))) {
    const floor = floorOf(allCells, cell);
    if (!floor) continue;
    const name = `${cell.scenario} ${NAMES[cell.target]} c=${cell.connections}`;
    const rate = cell.result.rps / floor.result.rps;
    const tail = cell.result.latency.p99 / floor.result.latency.p99;
    if (cell.scenario === 'short-sessions' && cell.connections === 128) goal(rate >= 0.9, `${name}: req/s ${times(rate)} the floor's (goal >= 0.9x)`);
    if ((cell.scenario === 'short-sessions' || cell.scenario === 'long-sessions') && cell.connections === 128) goal(tail <= 1.5, `${name}: p99 ${times(tail)} the floor's (goal <= 1.5x)`);
    if (cell.scenario === 'long-sessions' && cell.connections === 1) {
      const [own, floors] = [addedMs(allCells, cell), addedMs(allCells, floor)];
      if (own !== undefined && floors !== undefined) goal(own <= floors + 0.5, `${name}: Δp50 ${signed(own)} ms against the floor's ${signed(floors)} ms (goal <= the floor's + 0.5 ms)`);
    }
    if (cell.scenario === 'streams' && cell.connections === 16) goal(rate >= 0.9, `${name}: streams/s ${times(rate)} the floor's (goal >= 0.9x)`);
    if (cell.scenario === 'streams' && cell.connections === 1) {
      const cpu = cpuUs(cell) / cpuUs(floor);
      goal(cpu <= 1.2, `${name}: CPU a stream ${cpuUs(cell).toFixed(0)} µs, ${times(cpu)} the floor's (goal <= 1.2x)`);
    }
    if (cell.scenario === 'paced-streams' && cell.result.firstPiece && floor.result.firstPiece) {
      const first = cell.result.firstPiece.p99 / floor.result.firstPiece.p99;
      goal(first <= 1.5, `${name}: first chunk p99 ${times(first)} the floor's (goal <= 1.5x)`);
    }
  }
  return goals;
}
