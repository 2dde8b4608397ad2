import cluster, { type Worker } from 'node:cluster';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { servePrimary } from '../../gateway/server/cluster-rpc.js';
import { metricsHandlers } from '../../gateway/operations/metrics-route.js';
import type { MetricsWorkerReady } from '../support/metrics-cluster-worker.js';
import { parsePrometheusText, sampleValue } from '../support/prometheus-text.js';

const WORKER_SCRIPT = fileURLToPath(new URL('../support/metrics-cluster-worker.ts', import.meta.url));

describe('/metrics across cluster workers', () => {
  const workers: Worker[] = [];
  let stopServing: (() => void) | undefined;

  before(() => cluster.setupPrimary({ exec: WORKER_SCRIPT, execArgv: ['--import', 'tsx'] }));
  afterEach(async () => {
    stopServing?.();
    stopServing = undefined;
    await Promise.all(workers.splice(0).map(stopWorker));
  });

  /** Forks a worker and returns the URL of its /metrics once it listens. */
  async function startWorker(env: { TURNS: number; CACHED_ACTORS: number; BACKLOG: number }): Promise<string> {
    const worker = cluster.fork(Object.fromEntries(Object.entries(env).map(([key, value]) => [key, String(value)])));
    workers.push(worker);
    const [ready] = (await once(worker, 'message')) as [MetricsWorkerReady];
    return `http://127.0.0.1:${ready.metricsPort}/metrics`;
  }

  async function stopWorker(worker: Worker): Promise<void> {
    if (worker.isDead()) return;
    const exited = once(worker, 'exit');
    worker.kill();
    await exited;
  }

  it("answers on any worker with every worker's counters summed and the shared backlog counted once", async () => {
    stopServing = servePrimary(metricsHandlers());
    const urls = await Promise.all([startWorker({ TURNS: 2, CACHED_ACTORS: 1, BACKLOG: 7 }), startWorker({ TURNS: 3, CACHED_ACTORS: 4, BACKLOG: 7 })]);
    for (const url of urls) {
      const response = await fetch(url);
      expect(response.status).to.equal(200);
      expect(response.headers.get('content-type')).to.match(/^text\/plain; version=0\.0\.4/);
      const samples = parsePrometheusText(await response.text());
      expect(sampleValue(samples, 'turns_total', { outcome: 'ok' }), url).to.equal(5);
      expect(sampleValue(samples, 'cached_actors'), url).to.equal(5);
      expect(sampleValue(samples, 'webhook_backlog'), url).to.equal(7);
    }
  });

  it('answers 502 in the OpenAI error shape when the primary cannot gather the metrics', async () => {
    stopServing = servePrimary({});
    const url = await startWorker({ TURNS: 1, CACHED_ACTORS: 0, BACKLOG: 0 });
    const response = await fetch(url);
    expect(response.status).to.equal(502);
    const body = (await response.json()) as { error: { type: string; code: string; message: string } };
    expect(body.error).to.include({ type: 'upstream_error', code: 'upstream_unavailable' });
    expect(body.error.message).to.include('unknown method metrics.collect');
  });
});
