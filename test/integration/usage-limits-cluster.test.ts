import cluster, { type Worker } from 'node:cluster';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { servePrimary } from '../../gateway/server/cluster-rpc.js';
import type { UsageLimitSettings } from '../../runtime/usage/usage-ledger.js';
import { limitHandlers } from '../../gateway/http/usage-limits.js';
import type { LimitProbe, LimitProbeAnswer } from '../support/limits-cluster-worker.js';

const WORKER_SCRIPT = fileURLToPath(new URL('../support/limits-cluster-worker.ts', import.meta.url));
const LIMITS: UsageLimitSettings = { requests_per_minute: 0, burst: 0, concurrent_requests: 2 };

/** The first message from `worker` that `wanted` picks. */
function nextMessage<T>(worker: Worker, wanted: (message: T) => boolean): Promise<T> {
  return new Promise((resolve) => {
    const onMessage = (message: T) => {
      if (!wanted(message)) return;
      worker.off('message', onMessage);
      resolve(message);
    };
    worker.on('message', onMessage);
  });
}

describe('usage limits across cluster workers', () => {
  const workers: Worker[] = [];
  let stopServing: (() => void) | undefined;
  let probes = 0;

  before(() => cluster.setupPrimary({ exec: WORKER_SCRIPT, execArgv: ['--import', 'tsx'] }));
  afterEach(async () => {
    stopServing?.();
    stopServing = undefined;
    await Promise.all(workers.splice(0).map(stopWorker));
  });

  async function startWorker(): Promise<Worker> {
    const worker = cluster.fork({ LIMITS_JSON: JSON.stringify(LIMITS) });
    workers.push(worker);
    await nextMessage<{ ready?: boolean }>(worker, (message) => message?.ready === true);
    return worker;
  }

  async function stopWorker(worker: Worker): Promise<void> {
    if (worker.isDead()) return;
    const exited = once(worker, 'exit');
    worker.kill();
    await exited;
  }

  function ask(worker: Worker, op: LimitProbe['op'], userId?: string): Promise<LimitProbeAnswer> {
    const probe = ++probes;
    const answer = nextMessage<LimitProbeAnswer>(worker, (message) => message?.probe === probe);
    worker.send({ probe, op, userId } satisfies LimitProbe);
    return answer;
  }

  const admit = async (worker: Worker, userId: string) => (await ask(worker, 'admit', userId)).admitted;

  it('counts the requests of every worker against one limit per instance', async () => {
    stopServing = servePrimary(limitHandlers(LIMITS));
    const [first, second] = await Promise.all([startWorker(), startWorker()]);
    expect([await admit(first!, 'ann'), await admit(first!, 'ann')]).to.deep.equal([true, true]);
    const refused = await ask(second!, 'admit', 'ann');
    expect(refused).to.include({ admitted: false, retryAfter: '1' });
    expect(refused.message).to.include('limits.concurrent_requests');
    expect(await admit(second!, 'bob')).to.equal(true);
  });

  it('frees a permit when its worker releases it', async () => {
    stopServing = servePrimary(limitHandlers(LIMITS));
    const worker = await startWorker();
    await admit(worker, 'ann');
    await admit(worker, 'ann');
    expect(await admit(worker, 'ann')).to.equal(false);
    await ask(worker, 'release');
    expect(await admit(worker, 'ann')).to.equal(true);
  });

  it('drops the permits of a worker that exits', async () => {
    stopServing = servePrimary(limitHandlers(LIMITS));
    const [leaving, staying] = await Promise.all([startWorker(), startWorker()]);
    await admit(leaving!, 'ann');
    await admit(leaving!, 'ann');
    expect(await admit(staying!, 'ann')).to.equal(false);
    await stopWorker(leaving!);
    expect(await admit(staying!, 'ann')).to.equal(true);
  });

  it('lets requests through and logs a warning when the primary does not answer', async () => {
    const worker = await startWorker();
    expect(await admit(worker, 'ann')).to.equal(true);
    expect(await admit(worker, 'ann')).to.equal(true);
    const answer = await ask(worker, 'admit', 'ann');
    expect(answer.admitted).to.equal(true);
    expect(answer.warnings).to.have.length(3);
    expect(answer.warnings[0]).to.match(/did not answer limits\.admit/);
  });
});
