import { expect } from 'chai';
import { parseBenchOptions, SCENARIOS } from '../../scripts/bench/options.js';
import { createTextSource } from '../../scripts/bench/text-source.js';

describe('parseBenchOptions', () => {
  it('runs every scenario at full size when no option is given', () => {
    const options = parseBenchOptions([]);
    expect(options.scenarios).to.deep.equal([...SCENARIOS]);
    expect(options).to.include({ sessions: 100_000, cacheBound: 10_000, memories: 100_000, queries: 1_000, starts: 5, cachedSessions: 10_000 });
    expect(options.workers).to.deep.equal([1, 4]);
  });

  it('shrinks the session-memory and recall sizes when --quick is given', () => {
    expect(parseBenchOptions(['--quick'])).to.include({ sessions: 2_000, cacheBound: 500, memories: 10_000, queries: 200, starts: 2, cachedSessions: 1_000 });
  });

  it('measures 1,000 short sessions a cell and 200 paced streams at once, fewer with --quick, as many as asked otherwise', () => {
    expect(parseBenchOptions([])).to.include({ shortSessions: 1_000, pacedStreams: 200 });
    expect(parseBenchOptions(['--quick'])).to.include({ shortSessions: 200, pacedStreams: 40 });
    expect(parseBenchOptions(['--quick', '--paced-streams', '300', '--short-sessions', '50'])).to.include({ shortSessions: 50, pacedStreams: 300 });
    expect(() => parseBenchOptions(['--paced-streams', '0'])).to.throw(/--paced-streams must be a positive number, got '0'/);
  });

  it('measures the selected targets in a scenario against the floor without the throughput scenario', () => {
    const options = parseBenchOptions(['--scenario', 'short-sessions,paced-streams', '--targets', 'persisted,pg']);
    expect(options.scenarios).to.deep.equal(['short-sessions', 'paced-streams']);
    expect(options.targets).to.deep.equal(['persisted', 'pg']);
    expect(parseBenchOptions(['--scenario', 'streams']).targets).to.deep.equal(['direct', 'passthrough', 'persisted', 'pglite', 'pg']);
  });

  it('sends no Idempotency-Key unless --idempotency-keys asks for one on every request', () => {
    expect(parseBenchOptions([]).idempotencyKeys).to.equal(false);
    expect(parseBenchOptions(['--idempotency-keys']).idempotencyKeys).to.equal(true);
  });

  it('leaves the service untraced unless --tracing asks it to export every span', () => {
    expect(parseBenchOptions([]).tracing).to.equal(false);
    expect(parseBenchOptions(['--tracing']).tracing).to.equal(true);
  });

  it('measures no chat target when the throughput scenario is not selected', () => {
    const options = parseBenchOptions(['--scenario', 'recall,workers', '--targets', 'pg']);
    expect(options.scenarios).to.deep.equal(['recall', 'workers']);
    expect(options.targets).to.deep.equal([]);
  });

  it('rejects an unknown scenario, naming the allowed ones', () => {
    expect(() => parseBenchOptions(['--scenario', 'latency'])).to.throw(/--scenario: unknown latency \(allowed: throughput,/);
  });

  it('measures each service target in one start unless --rounds asks for more, and refuses a round count that is not a whole number', () => {
    expect(parseBenchOptions([]).rounds).to.equal(1);
    expect(parseBenchOptions(['--rounds', '5']).rounds).to.equal(5);
    expect(() => parseBenchOptions(['--rounds', '0'])).to.throw(/--rounds must be a positive number, got '0'/);
    expect(() => parseBenchOptions(['--rounds', '1.5'])).to.throw(/--rounds must be a whole number, got '1.5'/);
  });

  it('rejects a worker count that is not a whole number', () => {
    expect(() => parseBenchOptions(['--workers', '1,2.5'])).to.throw(/--workers must be a whole number, got '2.5'/);
  });
});

describe('createTextSource', () => {
  it('gives the same sentences for the same seed and others for another seed', () => {
    const first = createTextSource(7);
    const again = createTextSource(7);
    const other = createTextSource(8);
    const sentences = [first.sentence(12), first.sentence(12)];
    expect([again.sentence(12), again.sentence(12)]).to.deep.equal(sentences);
    expect(other.sentence(12)).to.not.equal(sentences[0]);
    expect(sentences[0]!.split(' ')).to.have.length(12);
  });
});
