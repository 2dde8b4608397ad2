import { expect } from 'chai';
import { averageCpu } from '../../scripts/bench/cpu-usage.js';
import { summariseLoad, type LoadPhase } from '../../scripts/bench/load.js';

const phase = (totals: number[], elapsedMs: number, windowUs: [number, number], errors: string[] = []): LoadPhase => ({
  totals,
  firstPieces: [],
  errors: errors.length,
  errorSamples: errors,
  elapsedMs,
  windowUs,
});

describe('a bench cell measured in two halves (A B B A)', () => {
  it('adds the halves together: requests over their summed time, percentiles over all their durations', () => {
    const first = phase([1, 2, 3, 4], 1_000, [0, 1_000_000]);
    const second = phase([10, 20], 500, [5_000_000, 5_500_000], ['HTTP 500']);
    const result = summariseLoad([first, second]);
    expect(result).to.deep.include({ ok: 6, errors: 1, errorSamples: ['HTTP 500'], elapsedMs: 1_500, rps: 4, windowUs: [0, 5_500_000] });
    expect(result.latency).to.deep.include({ p50: 3, max: 20 });
    expect(result.latency.mean).to.be.closeTo(40 / 6, 1e-9);
    expect(result).to.not.have.property('firstPiece');
  });

  it('weights each half’s cores by its length, and counts a process missing from one half as idle there', () => {
    const cpu = averageCpu([
      { usage: { byProcess: { service: 1, postgres: 0.3 }, foreign: 0, steal: 0.3 }, seconds: 3 },
      { usage: { byProcess: { service: 0.6 }, foreign: 0.4, steal: 0 }, seconds: 1 },
    ]);
    expect(cpu.byProcess.service).to.be.closeTo(0.9, 1e-9);
    expect(cpu.byProcess.postgres).to.be.closeTo(0.225, 1e-9);
    expect(cpu.foreign).to.be.closeTo(0.1, 1e-9);
    expect(cpu.steal).to.be.closeTo(0.225, 1e-9);
  });
});
