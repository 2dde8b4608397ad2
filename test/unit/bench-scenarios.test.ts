import { expect } from 'chai';
import { parseMagicWords } from '../../scripts/fake-llm/magic-words.js';
import { splitWords } from '../../scripts/fake-llm/messages.js';
import type { CellResult } from '../../scripts/bench/cell-result.js';
import { floorScenarioGoals, floorScenarioSections } from '../../scripts/bench/scenario-report.js';
import { HISTORY_MESSAGES, scenarioBodies, scenarioCells, sessionHeaders, type SessionScenario } from '../../scripts/bench/scenarios.js';
import { startUpGoals, type StartUpReport } from '../../scripts/bench/start-up.js';

const sizes = { durationMs: 5_000, warmup: 500, shortSessions: 1_000, pacedStreams: 200 };
const messagesOf = (body: Buffer) => (JSON.parse(body.toString('utf8')) as { messages: { role: string; content: string }[] }).messages;

describe('the scenarios against the floor', () => {
  it('gives a client a new session after five turns in short sessions, and one session throughout otherwise', () => {
    const short = sessionHeaders('bench-short', 5);
    const sessions = Array.from({ length: 11 }, () => short(3)['x-session-id']);
    expect(sessions.slice(0, 5)).to.deep.equal(Array(5).fill('bench-short-3-0'));
    expect(sessions.slice(5, 10)).to.deep.equal(Array(5).fill('bench-short-3-1'));
    expect(sessions[10]).to.equal('bench-short-3-2');
    // Each client counts its own turns.
    expect(short(4)['x-session-id']).to.equal('bench-short-4-0');
    const long = sessionHeaders('bench-long');
    expect(new Set(Array.from({ length: 20 }, () => long(0)['x-session-id']))).to.deep.equal(new Set(['bench-long-0-0']));
  });

  it('measures 1,000 sessions of five turns a cell at 128 and 32 connections', () => {
    const cells = scenarioCells('short-sessions', sizes);
    expect(cells.map((cell) => [cell.connections, cell.requests, cell.turnsPerSession])).to.deep.equal([
      [128, 5_000, 5],
      [32, 5_000, 5],
    ]);
  });

  it('opens a long-session window only after every session could have its 20 messages of history', () => {
    const [many, one] = scenarioCells('long-sessions', sizes);
    expect(many).to.include({ connections: 128, fullHistory: true, againstDirect: false });
    expect(many!.warmup).to.be.at.least(128 * (HISTORY_MESSAGES / 2));
    expect(one).to.include({ connections: 1, warmup: 500, againstDirect: true });
  });

  it('starts the paced streams all at once, without a warm-up in the window, for 12 s', () => {
    expect(scenarioCells('paced-streams', sizes)).to.deep.equal([
      { connections: 200, stream: true, chunks: 200, paceMs: 20, warmup: 0, durationMs: 12_000, fullHistory: false, againstDirect: true },
    ]);
  });

  it('asks the scripted LLM for replies of exactly 200 chunks, paced 20 ms apart in the paced streams', () => {
    const [streams] = scenarioCells('streams', sizes);
    const [paced] = scenarioCells('paced-streams', sizes);
    for (const body of scenarioBodies(streams!, false)) {
      const messages = messagesOf(body);
      expect(splitWords(`Echo: ${messages.at(-1)!.content}`)).to.have.length(200);
      expect(parseMagicWords(messages)).to.equal(undefined);
    }
    for (const body of scenarioBodies(paced!, false)) {
      const messages = messagesOf(body);
      expect(splitWords(`Echo: ${messages.at(-1)!.content}`)).to.have.length(200);
      expect(parseMagicWords(messages)).to.deep.equal({ pieceDelayMs: 20 });
    }
  });

  it('sends the LLM alone the conversation a target with a full history sends it, and a target only the new message', () => {
    const [, one] = scenarioCells('long-sessions', sizes);
    const direct = messagesOf(scenarioBodies(one!, true)[0]!);
    expect(direct).to.have.length(1 + HISTORY_MESSAGES + 1);
    expect(direct.slice(1, 3).map((message) => message.role)).to.deep.equal(['user', 'assistant']);
    expect(direct[2]!.content).to.equal(`Echo: ${direct[1]!.content}`);
    expect(messagesOf(scenarioBodies(one!, false)[0]!).map((message) => message.role)).to.deep.equal(['system', 'user']);
    const [paced] = scenarioCells('paced-streams', sizes);
    expect(messagesOf(scenarioBodies(paced!, true)[0]!)).to.have.length(2);
  });
});

describe('the goals against the floor', () => {
  const cell = (scenario: SessionScenario, target: CellResult['target'], connections: number, figures: { rps: number; p50?: number; p99?: number; firstP99?: number; cores?: number }): CellResult => ({
    target,
    api: 'chat',
    mode: target === 'direct' ? null : 'session',
    stream: figures.firstP99 !== undefined,
    connections,
    scenario,
    result: {
      ok: 100,
      errors: 0,
      errorSamples: [],
      elapsedMs: 1000,
      rps: figures.rps,
      latency: { p50: figures.p50 ?? 1, p95: 1, p99: figures.p99 ?? 1, mean: 1, max: 1 },
      ...(figures.firstP99 !== undefined ? { firstPiece: { p50: figures.p50 ?? 1, p95: 1, p99: figures.firstP99, mean: 1, max: 1 } } : {}),
      windowUs: [0, 1],
    },
    cpu: { byProcess: { bench: 0.5, 'fake LLM': 0.3, [target === 'persisted' ? 'persisted passthrough' : `service ${target}`]: figures.cores ?? 1, postgres: 0.2 }, foreign: 0, steal: 0 },
    flagged: false,
    noisy: false,
  });

  it('reads short sessions at 128 connections against the floor: req/s at least 0.9 of it, p99 at most 1.5 times', () => {
    const goals = floorScenarioGoals([
      cell('short-sessions', 'persisted', 128, { rps: 800, p99: 100 }),
      cell('short-sessions', 'pg', 128, { rps: 720, p99: 160 }),
      cell('short-sessions', 'pglite', 128, { rps: 700, p99: 140 }),
      // No goal at 32 connections: that cell is read for its CPU.
      cell('short-sessions', 'pg', 32, { rps: 100 }),
    ]);
    expect(goals).to.deep.equal([
      "MET  short-sessions service, PostgreSQL c=128: req/s 0.90x the floor's (goal >= 0.9x)",
      "MISS short-sessions service, PostgreSQL c=128: p99 1.60x the floor's (goal <= 1.5x)",
      "MISS short-sessions service, PGlite c=128: req/s 0.88x the floor's (goal >= 0.9x)",
      "MET  short-sessions service, PGlite c=128: p99 1.40x the floor's (goal <= 1.5x)",
    ]);
  });

  it("allows one long session to add 0.5 ms more than the floor adds to the LLM's p50", () => {
    const goals = floorScenarioGoals([
      cell('long-sessions', 'direct', 1, { rps: 1000, p50: 0.5 }),
      cell('long-sessions', 'persisted', 1, { rps: 200, p50: 3.0 }),
      cell('long-sessions', 'pg', 1, { rps: 180, p50: 3.4 }),
      cell('long-sessions', 'pglite', 1, { rps: 150, p50: 3.6 }),
    ]);
    expect(goals).to.deep.equal([
      "MET  long-sessions service, PostgreSQL c=1: Δp50 +2.90 ms against the floor's +2.50 ms (goal <= the floor's + 0.5 ms)",
      "MISS long-sessions service, PGlite c=1: Δp50 +3.10 ms against the floor's +2.50 ms (goal <= the floor's + 0.5 ms)",
    ]);
  });

  it("reads streams by streams/s at 16 at once, CPU a stream one at a time, and the paced streams' first chunk p99", () => {
    const goals = floorScenarioGoals([
      cell('streams', 'persisted', 16, { rps: 300, firstP99: 5 }),
      cell('streams', 'pg', 16, { rps: 150, firstP99: 5 }),
      // 0.5 core at 100 streams/s: 5,000 µs a stream against the floor's 4,000.
      cell('streams', 'persisted', 1, { rps: 100, firstP99: 5, cores: 0.4 }),
      cell('streams', 'pg', 1, { rps: 100, firstP99: 5, cores: 0.5 }),
      cell('paced-streams', 'persisted', 200, { rps: 50, firstP99: 1000 }),
      cell('paced-streams', 'pglite', 200, { rps: 45, firstP99: 1400 }),
    ]);
    expect(goals).to.deep.equal([
      "MISS streams service, PostgreSQL c=16: streams/s 0.50x the floor's (goal >= 0.9x)",
      "MISS streams service, PostgreSQL c=1: CPU a stream 5000 µs, 1.25x the floor's (goal <= 1.2x)",
      "MET  paced-streams service, PGlite c=200: first chunk p99 1.40x the floor's (goal <= 1.5x)",
    ]);
  });

  it('gives each scenario measured a section with its cells as ratios to the floor, none for the LLM alone', () => {
    const [section, ...others] = floorScenarioSections([
      cell('long-sessions', 'direct', 1, { rps: 1000, p50: 0.5 }),
      cell('long-sessions', 'persisted', 1, { rps: 200, p50: 3.0, p99: 10 }),
      cell('long-sessions', 'pg', 1, { rps: 100, p50: 3.4, p99: 20 }),
    ]);
    expect(others).to.deep.equal([]);
    const { headers, rows } = section!.table!;
    const column = (name: string) => rows.map((row) => row[headers.indexOf(name)]);
    expect(column('target')).to.deep.equal(['direct LLM', 'floor', 'service, PostgreSQL']);
    expect(column('x floor')).to.deep.equal(['', '', '0.50x']);
    expect(column('p99 x floor')).to.deep.equal(['', '', '2.00x']);
    expect(column('Δ p50')).to.deep.equal(['', '+2.50', '+2.90']);
  });
});

describe('startUpGoals', () => {
  const reading = (readyMs: number) => ({ readyMs, rssAtRest: 0, rssPeak: 0 });
  const report: StartUpReport = {
    command: 'node scripts/svc-agent.mjs',
    cases: [
      { name: 'PostgreSQL server, migrated database', database: 'pg', fresh: false, readings: [reading(1400), reading(1600), reading(9000)], goal: { readyMs: 1500, rssAtRest: 0 } },
      { name: 'embedded PGlite, new folder', database: 'pglite', fresh: true, readings: [reading(6000)], goal: { readyMs: 5000, rssAtRest: 0 } },
      { name: 'embedded PGlite, existing folder', database: 'pglite', fresh: false, readings: [reading(3000)], goal: { readyMs: 2500, rssAtRest: 0 } },
    ],
    floors: [
      { name: 'Express + pg connected', database: 'pg', fresh: false, readyMs: [500, 9000, 400] },
      { name: 'PGlite opened on a new folder', database: 'pglite', fresh: true, readyMs: [5000] },
      { name: 'PGlite opened on an existing folder', database: 'pglite', fresh: false, readyMs: [300] },
    ],
    pglite: [],
    notes: [],
  };

  it('reads each median ready time against its floor: PostgreSQL within 3 times, a new PGlite folder within 1.3 times, none for an existing folder', () => {
    expect(startUpGoals(report)).to.deep.equal([
      'MISS start-up PostgreSQL server, migrated database: ready 3.20x the floor (Express + pg connected, 500 ms) (goal <= 3x)',
      'MET  start-up embedded PGlite, new folder: ready 1.20x the floor (PGlite opened on a new folder, 5000 ms) (goal <= 1.3x)',
    ]);
  });
});
