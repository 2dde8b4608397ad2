import { expect } from 'chai';
import { recallSection } from '../../scripts/bench/recall-latency.js';
import type { CellResult } from '../../scripts/bench/cell-result.js';
import { judgedRatios, roundRatios } from '../../scripts/bench/report.js';
import { median } from '../../scripts/bench/latency-stats.js';
import type { RecallCase } from '../../scripts/bench/recall-probe.js';
import { sessionMemorySection } from '../../scripts/bench/session-memory.js';
import type { MemoryReading, SessionMemoryProbeResult } from '../../scripts/bench/session-memory-probe.js';

const MB = 2 ** 20;
const reading = (sessions: number, cachedActors: number, heapMb: number): MemoryReading => ({
  sessions,
  cachedActors,
  registrySize: cachedActors,
  heapUsed: heapMb * MB,
  rss: 500 * MB,
  external: 250 * MB,
});
const run = (cacheSize: number, checkpoints: MemoryReading[]): SessionMemoryProbeResult => ({
  cacheSize,
  sessions: checkpoints.at(-1)!.sessions,
  turns: 1,
  concurrency: 8,
  fillMs: 1000,
  baseline: reading(0, 0, 30),
  checkpoints,
  afterEviction: reading(checkpoints.at(-1)!.sessions, 0, 31),
});

describe('sessionMemorySection', () => {
  it('meets the goal when each cached session adds less than 10 KB, and misses it above', () => {
    // 10,000 sessions adding 90 MB: 9.2 KB each; 100,000 adding 1,100 MB: 11.3 KB each.
    const { lines } = sessionMemorySection({ runs: [run(100_000, [reading(10_000, 10_000, 120), reading(100_000, 100_000, 1130)])] });
    expect(lines).to.include('MET  10000 cached sessions of 1 turn(s): 9.22 KB each (goal < 10 KB)');
    expect(lines).to.include('MISS 100000 cached sessions of 1 turn(s): 11.26 KB each (goal < 10 KB)');
  });

  it('calls the heap flat past the bound only when it grows less than 5% of what the cache adds', () => {
    const flat = sessionMemorySection({ runs: [run(10_000, [reading(10_000, 10_000, 130), reading(100_000, 10_000, 134)])] });
    const growing = sessionMemorySection({ runs: [run(10_000, [reading(10_000, 10_000, 130), reading(100_000, 10_000, 140)])] });
    expect(flat.lines[0]).to.match(/^MET  heap past the bound of 10000: .* \(\+4\.0% of what the cache adds/);
    expect(growing.lines[0]).to.match(/^MISS heap past the bound of 10000: .* \(\+10\.0% of what the cache adds/);
  });
});

describe('recallSection', () => {
  const recallCase = (p99: number, plan: string[]): RecallCase => ({
    user: 'bench-user',
    userMemories: 100_000,
    statistics: 'as filled',
    efSearch: 40,
    writers: 0,
    writesPerSecond: 0,
    latency: { p50: p99 / 2, p95: p99, p99, mean: p99 / 2, max: p99 },
    plan,
    exactShare: 0.9,
    exactQueries: 100,
  });
  const section = (cases: RecallCase[]) =>
    recallSection({ runs: [{ database: 'pglite', memories: 100_000, dimensions: 256, results: 5, fillMs: 1000, indexBuildMs: 1000, indexes: [], cases }], notes: [] });

  it('misses the goal when p99 reaches 20 ms and names the scan the plan used', () => {
    const { lines, table } = section([
      recallCase(25, ['Limit', '  ->  Sort', '        Sort Method: top-N heapsort', '        ->  Bitmap Index Scan on memories_user_id_idx  (cost=0.00..4.77)']),
      recallCase(3, ['Limit', '  ->  Index Scan using memories_embedding_hnsw_idx on memories  (cost=372.42..14921.00)']),
    ]);
    expect(lines[0]).to.equal('MISS pglite, as filled, a user with 100000 memories, ef_search 40: recall p99 25.00 ms (goal < 20 ms)');
    expect(lines[1]).to.equal('MET  pglite, as filled, a user with 100000 memories, ef_search 40: recall p99 3.00 ms (goal < 20 ms)');
    expect(table!.rows.map((row) => row.at(-1))).to.deep.equal([
      'Bitmap Index Scan on memories_user_id_idx + sort',
      'Index Scan using memories_embedding_hnsw_idx',
    ]);
  });
});

describe('roundRatios', () => {
  const cell = (api: 'chat' | 'responses', rounds?: Array<[rps: number, serviceCores: number]>): CellResult => ({
    target: 'pg',
    api,
    mode: 'session',
    stream: false,
    connections: 32,
    result: { ok: 0, errors: 0, errorSamples: [], elapsedMs: 1000, rps: 1000, latency: { p50: 1, p95: 1, p99: 1, mean: 1, max: 1 }, windowUs: [0, 1] },
    cpu: { byProcess: {}, foreign: 0, steal: 0 },
    flagged: false,
    noisy: false,
    ...(rounds ? { rounds: rounds.map(([rps, cores]) => ({ rps, cpu: { byProcess: { bench: 0.1, 'fake LLM': 0.2, 'service pg': cores, postgres: 0.3 }, foreign: 0, steal: 0 } })) } : {}),
  });

  it("gives each round's req/s ratio and ratio of the service's CPU a turn, leaving the bench, the LLM and PostgreSQL out", () => {
    const chat = cell('chat', [
      [1000, 1.0],
      [800, 1.0],
    ]);
    const responses = cell('responses', [
      [900, 1.0],
      [800, 0.8],
    ]);
    const ratios = roundRatios(chat, responses);
    expect(ratios).to.have.length(2);
    expect(ratios[0]!.rps).to.be.closeTo(0.9, 1e-9);
    // 1.0 core / 900 req/s against 1.0 core / 1000 req/s.
    expect(ratios[0]!.cpu).to.be.closeTo(1000 / 900, 1e-9);
    expect(ratios[1]!.rps).to.be.closeTo(1, 1e-9);
    expect(ratios[1]!.cpu).to.be.closeTo(0.8, 1e-9);
  });

  it('is empty for cells measured in one round', () => {
    expect(roundRatios(cell('chat'), cell('responses'))).to.deep.equal([]);
  });

  describe('judgedRatios', () => {
    it("takes the median of three rounds' ratios or more, so that one slow round does not decide the cell", () => {
      const chat = cell('chat', [
        [1000, 1.0],
        [1000, 1.0],
        [1000, 1.0],
      ]);
      // The third round ran in a slow spell: 0.6 of chat's req/s at the same cores.
      const responses = cell('responses', [
        [950, 1.0],
        [920, 1.0],
        [600, 1.0],
      ]);
      const judged = judgedRatios(chat, responses);
      expect(judged.rounds).to.equal(3);
      expect(judged.rps).to.be.closeTo(0.92, 1e-9);
      expect(judged.cpu).to.be.closeTo(1000 / 920, 1e-9);
    });

    it("takes the ratios of the cells' sums below three rounds", () => {
      const chat = { ...cell('chat'), cpu: { byProcess: { 'service pg': 1.0 }, foreign: 0, steal: 0 } };
      const responses = { ...cell('responses'), result: { ...cell('responses').result, rps: 800 }, cpu: { byProcess: { 'service pg': 1.0 }, foreign: 0, steal: 0 } };
      const judged = judgedRatios(chat, responses);
      expect(judged.rounds).to.equal(1);
      expect(judged.rps).to.be.closeTo(0.8, 1e-9);
      expect(judged.cpu).to.be.closeTo(1.25, 1e-9);
    });
  });
});

describe('median', () => {
  it('is the middle value, or the mean of the two middle ones', () => {
    expect(median([3, 1, 2])).to.equal(2);
    expect(median([4, 1, 3, 2])).to.equal(2.5);
    expect(median([])).to.be.NaN;
  });
});
