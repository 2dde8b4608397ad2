import { expect } from 'chai';
import { register as globalRegistry } from 'prom-client';
import { EventBus } from '../../runtime/observability/event-bus.js';
import { ServiceMetrics } from '../../runtime/observability/metrics.js';
import { createSessionRegistry } from '../../runtime/sessions/session-registry.js';
import { parsePrometheusText, sampleValue, type PrometheusSample } from '../support/prometheus-text.js';

describe('ServiceMetrics', () => {
  let events: EventBus;
  let supervisor: { registry: ReturnType<typeof createSessionRegistry>; cachedActors: number };
  let countPending: () => Promise<number>;
  let metrics: ServiceMetrics;

  beforeEach(() => {
    events = new EventBus();
    supervisor = { registry: createSessionRegistry(), cachedActors: 0 };
    countPending = async () => 0;
    metrics = new ServiceMetrics({ events, supervisor, webhooks: { countPending: () => countPending() } });
  });
  afterEach(() => metrics.close());

  async function scrape(of = metrics): Promise<PrometheusSample[]> {
    return parsePrometheusText(await of.registry.metrics());
  }

  const toolCall = (server: string, outcome: 'ok' | 'error') => events.emit('tool:call', { sessionId: 's1', userId: 'u1', tool: 'echo', server, durationMs: 5, outcome });
  const storageError = (willRetry: boolean) => events.emit('storage:error', { operation: 'store the reply', error: new Error('down'), attempt: 1, willRetry });

  it('counts tool calls by server and outcome', async () => {
    toolCall('files', 'ok');
    toolCall('files', 'ok');
    toolCall('files', 'error');
    toolCall('search', 'ok');
    const samples = await scrape();
    expect(sampleValue(samples, 'tool_calls_total', { server: 'files', outcome: 'ok' })).to.equal(2);
    expect(sampleValue(samples, 'tool_calls_total', { server: 'files', outcome: 'error' })).to.equal(1);
    expect(sampleValue(samples, 'tool_calls_total', { server: 'search', outcome: 'ok' })).to.equal(1);
  });

  it('counts a storage error that will be retried as a retry, and one that will not as an error', async () => {
    storageError(true);
    storageError(true);
    storageError(false);
    const samples = await scrape();
    expect(sampleValue(samples, 'storage_write_retries_total')).to.equal(2);
    expect(sampleValue(samples, 'storage_errors_total')).to.equal(1);
  });

  it('observes LLM call durations in seconds', async () => {
    events.emit('llm:reply', { sessionId: 's1', durationMs: 1500, finishReason: 'stop', toolCalls: 0, model: 'm', usage: null });
    events.emit('llm:error', { sessionId: 's1', userId: 'u1', durationMs: 250, message: 'HTTP 503' });
    const samples = await scrape();
    expect(sampleValue(samples, 'llm_request_duration_seconds_sum', { outcome: 'ok' })).to.equal(1.5);
    expect(sampleValue(samples, 'llm_request_duration_seconds_bucket', { outcome: 'ok', le: '1' })).to.equal(0);
    expect(sampleValue(samples, 'llm_request_duration_seconds_bucket', { outcome: 'ok', le: '2.5' })).to.equal(1);
    expect(sampleValue(samples, 'llm_request_duration_seconds_sum', { outcome: 'error' })).to.equal(0.25);
    expect(sampleValue(samples, 'llm_errors_total')).to.equal(1);
  });

  it('observes turn stages in seconds, by stage, and each LLM call as the llm_total stage', async () => {
    events.emit('turn:stage', { stage: 'user_committed', durationMs: 30 });
    events.emit('turn:stage', { stage: 'user_committed', durationMs: 700 });
    events.emit('turn:stage', { stage: 'connection_wait', durationMs: 2 });
    events.emit('llm:reply', { sessionId: 's1', durationMs: 4000, finishReason: 'stop', toolCalls: 0, model: 'm', usage: null });
    const samples = await scrape();
    expect(sampleValue(samples, 'turn_stage_duration_seconds_count', { stage: 'user_committed' })).to.equal(2);
    expect(sampleValue(samples, 'turn_stage_duration_seconds_sum', { stage: 'user_committed' })).to.be.closeTo(0.73, 1e-9);
    expect(sampleValue(samples, 'turn_stage_duration_seconds_bucket', { stage: 'user_committed', le: '0.05' })).to.equal(1);
    expect(sampleValue(samples, 'turn_stage_duration_seconds_count', { stage: 'connection_wait' })).to.equal(1);
    expect(sampleValue(samples, 'turn_stage_duration_seconds_sum', { stage: 'llm_total' })).to.equal(4);
    expect(sampleValue(samples, 'turn_stage_duration_seconds_count', { stage: 'llm_first_byte' })).to.equal(0);
  });

  it('counts the tokens LLM calls report, by model and kind, and nothing for a call without usage', async () => {
    const reply = (model: string, usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null) =>
      events.emit('llm:reply', { sessionId: 's1', durationMs: 5, finishReason: 'stop', toolCalls: 0, model, usage });
    reply('big', { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 });
    reply('big', { prompt_tokens: 8, completion_tokens: 2, total_tokens: 10 });
    reply('small', { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 });
    reply('other', null);
    const samples = await scrape();
    expect(sampleValue(samples, 'llm_tokens_total', { model: 'big', kind: 'prompt' })).to.equal(20);
    expect(sampleValue(samples, 'llm_tokens_total', { model: 'big', kind: 'completion' })).to.equal(5);
    expect(sampleValue(samples, 'llm_tokens_total', { model: 'small', kind: 'completion' })).to.equal(1);
    expect(sampleValue(samples, 'llm_tokens_total', { model: 'other', kind: 'prompt' })).to.equal(undefined);
  });

  it('reads live sessions, cached actors and the webhook backlog when scraped', async () => {
    supervisor.registry.trigger.upsert({ session: { sessionId: 's1', userId: 'u', state: 'user', status: 'waiting_for_input', transitions: 0, lastActive: 0 } });
    supervisor.cachedActors = 3;
    countPending = async () => 7;
    let samples = await scrape();
    expect([sampleValue(samples, 'live_sessions'), sampleValue(samples, 'cached_actors'), sampleValue(samples, 'webhook_backlog')]).to.deep.equal([1, 3, 7]);

    supervisor.registry.trigger.remove({ sessionId: 's1' });
    supervisor.cachedActors = 0;
    countPending = async () => 2;
    samples = await scrape();
    expect([sampleValue(samples, 'live_sessions'), sampleValue(samples, 'cached_actors'), sampleValue(samples, 'webhook_backlog')]).to.deep.equal([0, 0, 2]);
  });

  it('reports the webhook backlog as NaN, and still scrapes, when the count fails', async () => {
    countPending = async () => {
      throw new Error('connection refused');
    };
    const samples = await scrape();
    expect(sampleValue(samples, 'webhook_backlog')).to.be.NaN;
    expect(sampleValue(samples, 'cached_actors')).to.equal(0);
  });

  it('stops counting runtime events once closed', async () => {
    events.emit('turn:completed', { sessionId: 's1', userId: 'u', durationMs: 10, outcome: 'ok', usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } });
    metrics.close();
    events.emit('turn:completed', { sessionId: 's1', userId: 'u', durationMs: 10, outcome: 'ok', usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } });
    expect(sampleValue(await scrape(), 'turns_total', { outcome: 'ok' })).to.equal(1);
  });

  it('keeps its metrics to its own registry: two services in one process do not mix, the global registry stays empty', async () => {
    const otherEvents = new EventBus();
    const other = new ServiceMetrics({ events: otherEvents, supervisor: { registry: createSessionRegistry(), cachedActors: 0 }, webhooks: { countPending: async () => 0 } });
    try {
      events.emit('turn:completed', { sessionId: 's1', userId: 'u', durationMs: 10, outcome: 'cancelled', usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } });
      other.observeRequest({ method: 'GET', route: '/health', status: 200 }, 0.01);
      expect(sampleValue(await scrape(), 'turns_total', { outcome: 'cancelled' })).to.equal(1);
      expect(sampleValue(await scrape(other), 'turns_total', { outcome: 'cancelled' })).to.equal(undefined);
      expect(sampleValue(await scrape(other), 'http_requests_total', { method: 'GET', route: '/health', status: '200' })).to.equal(1);
      expect(sampleValue(await scrape(), 'http_requests_total', { method: 'GET', route: '/health', status: '200' })).to.equal(undefined);
      expect(globalRegistry.getSingleMetric('turns_total')).to.equal(undefined);
    } finally {
      other.close();
    }
  });

  it("shows the process's Node.js metrics in every service's scrape, from one collector per process", async () => {
    const other = new ServiceMetrics({ events: new EventBus(), supervisor: { registry: createSessionRegistry(), cachedActors: 0 }, webhooks: { countPending: async () => 0 } });
    try {
      for (const samples of [await scrape(), await scrape(other)]) {
        expect(sampleValue(samples, 'process_cpu_user_seconds_total')).to.be.a('number');
        expect(samples.filter((sample) => sample.name === 'nodejs_eventloop_lag_seconds')).to.have.length(1);
      }
      expect(metrics.registry.getSingleMetric('nodejs_eventloop_lag_seconds')).to.equal(other.registry.getSingleMetric('nodejs_eventloop_lag_seconds'));
    } finally {
      other.close();
    }
  });
});
