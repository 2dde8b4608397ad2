import { expect } from 'chai';
import { averageCpu } from '../../scripts/bench/cpu-usage.js';
import { runLoadPhase, summariseLoad, type Exchange, type LoadPhase } from '../../scripts/bench/load.js';

const phase = (totals: number[], elapsedMs: number, windowUs: [number, number], errors: string[] = []): LoadPhase => ({
  answers: totals.length,
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

describe('a bench phase’s measured window', () => {
  /** An exchange answering after `ms`, which logs each request's sending and answer beside the window's opening and closing. */
  function loggedExchange(ms: number) {
    const log: string[] = [];
    const exchange: Exchange = async (_dispatcher, _worker, seq) => {
      log.push(`sent ${seq}`);
      await new Promise((resolve) => setTimeout(resolve, ms));
      log.push(`answered ${seq}`);
      return { totalMs: ms };
    };
    return { log, exchange };
  }

  it('opens at the warm-up’s last answer without a pause in the load, and leaves out what is answered after its deadline', async () => {
    const { log, exchange } = loggedExchange(5);
    const phase = await runLoadPhase({
      origin: 'http://127.0.0.1:9',
      connections: 4,
      warmup: 8,
      durationMs: 60,
      exchange,
      onMeasureStart: () => log.push('open'),
      onMeasureEnd: () => log.push('close'),
    });
    const open = log.indexOf('open');
    const close = log.indexOf('close');
    // Opened at the eighth answer, while the other clients' requests were in flight.
    expect(log.slice(0, open).filter((entry) => entry.startsWith('answered'))).to.have.length(8);
    expect(log.slice(0, open).filter((entry) => entry.startsWith('sent')).length).to.be.greaterThan(8);
    // Counted: the answers inside the window; the requests in flight at its deadline are answered after it, and nothing is sent then.
    const answeredInside = log.slice(open, close).filter((entry) => entry.startsWith('answered'));
    const sentBefore = new Set(log.slice(0, open).filter((entry) => entry.startsWith('sent')).map((entry) => entry.slice('sent '.length)));
    const after = log.slice(close + 1);
    expect(phase.answers).to.equal(answeredInside.length);
    // Timed: those of them sent inside the window too.
    expect(phase.totals).to.have.length(answeredInside.filter((entry) => !sentBefore.has(entry.slice('answered '.length))).length);
    expect(after.length).to.be.within(1, 4);
    expect(after.every((entry) => entry.startsWith('answered'))).to.equal(true);
    expect(phase.elapsedMs).to.be.at.least(59);
    expect(phase.windowUs[1] - phase.windowUs[0]).to.be.closeTo(phase.elapsedMs * 1000, 2_000);
  });

  it('counts the answer of a request sent during the warm-up and answered in the window, but leaves its duration out', async () => {
    // Request 0 is slow: sent with the warm-up's first burst, it is answered only once the
    // other client's fourth answer has opened the window and that client sent its next request
    // (number 5, the window's first).
    let releaseFirst!: () => void;
    const firstAnswered = new Promise<void>((resolve) => (releaseFirst = resolve));
    const exchange: Exchange = async (_dispatcher, _worker, seq) => {
      if (seq === 5) releaseFirst();
      if (seq === 0) {
        await firstAnswered;
        return { totalMs: 80 };
      }
      await new Promise((resolve) => setTimeout(resolve, 1));
      return { totalMs: 5 };
    };
    const phase = await runLoadPhase({ origin: 'http://127.0.0.1:9', connections: 2, warmup: 4, durationMs: 50, exchange });
    expect(phase.totals).to.not.include(80);
    expect(phase.totals.length).to.be.greaterThan(0);
    expect(phase.answers).to.equal(phase.totals.length + 1);
  });

  it('with a number of requests, sends exactly those after the warm-up and closes once the last is answered', async () => {
    const { log, exchange } = loggedExchange(1);
    const phase = await runLoadPhase({ origin: 'http://127.0.0.1:9', connections: 3, warmup: 0, durationMs: 0, requests: 10, exchange, onMeasureEnd: () => log.push('close') });
    expect(phase.totals).to.have.length(10);
    expect(log.filter((entry) => entry.startsWith('sent'))).to.have.length(10);
    expect(log.at(-1)).to.equal('close');
  });
});
