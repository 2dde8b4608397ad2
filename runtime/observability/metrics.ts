import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { EventBus } from './event-bus.js';
import type { SessionRegistry } from '../sessions/session-registry.js';
import { TURN_STAGES } from './turn-stages.js';

/** What the metrics read at scrape time and listen to. */
export type ServiceMetricsDeps = {
  events: EventBus;
  /** The supervisor's live sessions and its actor cache (`Supervisor` fits). */
  supervisor: { readonly registry: SessionRegistry; readonly cachedActors: number };
  /** The webhook outbox (`WebhookStore` fits). */
  webhooks: { countPending(): Promise<number> };
};

/** The labels of one HTTP request: `route` is the route pattern or `unmatched`, never the raw URL. */
export type RequestLabels = { method: string; route: string; status: number };

/** Seconds, from a few milliseconds (health, models) to minutes (a long streamed turn or LLM call). */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** A scrape must not wait on a database that does not answer. */
const BACKLOG_TIMEOUT_MS = 2_000;

/**
 * The service's Prometheus metrics, on a registry of its own (several services can run in
 * one process): HTTP requests, LLM calls, tool calls, turns and storage errors from the
 * runtime event bus, the durations of a turn's stages, live sessions and the webhook backlog read at scrape time, and the
 * default Node.js process metrics. Names carry no prefix.
 */
export class ServiceMetrics {
  /** Every metric of this service, and the process's. */
  readonly registry: Registry;
  private readonly httpRequests: Counter<'method' | 'route' | 'status'>;
  private readonly httpDuration: Histogram<'method' | 'route' | 'status'>;
  private readonly detachers: Array<() => void>;

  constructor(deps: ServiceMetricsDeps) {
    const own = new Registry();
    const registers = [own];
    this.httpRequests = new Counter({ name: 'http_requests_total', help: 'HTTP requests answered, by method, route pattern and status.', labelNames: ['method', 'route', 'status'], registers });
    this.httpDuration = new Histogram({
      name: 'http_request_duration_seconds',
      help: 'Time from a request to the end of its response, by method, route pattern and status.',
      labelNames: ['method', 'route', 'status'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    const llmDuration = new Histogram({ name: 'llm_request_duration_seconds', help: 'LLM calls by outcome (ok or error) and their duration.', labelNames: ['outcome'], buckets: DURATION_BUCKETS, registers });
    const llmErrors = new Counter({ name: 'llm_errors_total', help: 'LLM calls that failed (the server answered an error, timed out or was unreachable, or the call was cancelled).', registers });
    const llmTokens = new Counter({
      name: 'llm_tokens_total',
      help: 'Tokens the LLM server reported for the service\'s calls (streamed ones included), by model and kind (prompt or completion).',
      labelNames: ['model', 'kind'],
      registers,
    });
    const turnStages = new Histogram({
      name: 'turn_stage_duration_seconds',
      help: 'Time a turn spent in each stage (connection_wait: a database query waiting for a connection; session_wait; plan; user_committed; prompt; llm_first_byte; llm_total; reply_committed).',
      labelNames: ['stage'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    // Every stage is exported from the start, empty until a turn passes it.
    for (const stage of TURN_STAGES) turnStages.zero({ stage });
    const toolCalls = new Counter({ name: 'tool_calls_total', help: 'MCP tool calls, by tool server and outcome (ok or error).', labelNames: ['server', 'outcome'], registers });
    const turns = new Counter({ name: 'turns_total', help: 'Finished turns, by outcome (ok, llm_error or cancelled).', labelNames: ['outcome'], registers });
    const writeRetries = new Counter({ name: 'storage_write_retries_total', help: 'Database writes that failed and are tried again.', registers });
    const storageErrors = new Counter({ name: 'storage_errors_total', help: 'Database operations that failed for good (not retried).', registers });
    const budgetRefusals = new Counter({
      name: 'budget_refusals_total',
      help: 'Token budgets reached, by budget (tokens_per_day, tokens_per_month, tokens_per_turn) and what was refused (request: answered 429 insufficient_quota; llm_call: a turn called the model no more).',
      labelNames: ['budget', 'refused'],
      registers,
    });
    const { supervisor, webhooks } = deps;
    new Gauge({
      name: 'live_sessions',
      help: 'Sessions in the live registry of the supervisor.',
      registers,
      collect() {
        this.set(supervisor.registry.getSnapshot().context.sessions.size);
      },
    });
    new Gauge({
      name: 'cached_actors',
      help: 'Session actors held in memory.',
      registers,
      collect() {
        this.set(supervisor.cachedActors);
      },
    });
    new Gauge({
      name: 'webhook_backlog',
      help: 'Webhook deliveries waiting to be sent (NaN when the database did not answer).',
      // Every process counts the same shared table: a cluster reports it once, not summed.
      aggregator: 'max',
      registers,
      async collect() {
        this.set(await countOrNaN(() => webhooks.countPending()));
      },
    });

    this.registry = Registry.merge([processMetrics(), own]);

    const { events } = deps;
    this.detachers = [
      events.on('llm:reply', ({ durationMs, model, usage }) => {
        llmDuration.observe({ outcome: 'ok' }, durationMs / 1000);
        turnStages.observe({ stage: 'llm_total' }, durationMs / 1000);
        if (!usage) return;
        llmTokens.inc({ model, kind: 'prompt' }, usage.prompt_tokens);
        llmTokens.inc({ model, kind: 'completion' }, usage.completion_tokens);
      }),
      events.on('llm:error', ({ durationMs }) => {
        llmDuration.observe({ outcome: 'error' }, durationMs / 1000);
        llmErrors.inc();
      }),
      events.on('turn:stage', ({ stage, durationMs }) => turnStages.observe({ stage }, durationMs / 1000)),
      events.on('tool:call', ({ server, outcome }) => toolCalls.inc({ server, outcome })),
      events.on('turn:completed', ({ outcome }) => turns.inc({ outcome })),
      events.on('storage:error', ({ willRetry }) => (willRetry ? writeRetries : storageErrors).inc()),
      events.on('budget:exceeded', ({ budget, refused }) => budgetRefusals.inc({ budget, refused })),
    ];
  }

  /** Records one answered HTTP request and how long it took. */
  observeRequest(labels: RequestLabels, seconds: number): void {
    const values = { method: labels.method, route: labels.route, status: String(labels.status) };
    this.httpRequests.inc(values);
    this.httpDuration.observe(values, seconds);
  }

  /** Detaches from the event bus: the service is closing. */
  close(): void {
    for (const detach of this.detachers.splice(0)) detach();
  }
}

let processRegistry: Registry | undefined;

/**
 * Node.js's process metrics (CPU, memory, event loop lag, garbage collection), collected once
 * per process: prom-client watches the event loop and the collector for them and never
 * stops, so a process that starts several services (tests) must not start them again.
 */
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/** The count, or NaN when it fails or takes too long: an unknown backlog must not fail the scrape. */
async function countOrNaN(count: () => Promise<number>): Promise<number> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<number>((resolve) => {
    timer = setTimeout(() => resolve(Number.NaN), BACKLOG_TIMEOUT_MS);
  });
  try {
    return await Promise.race([count(), timeout]);
  } catch {
    return Number.NaN;
  } finally {
    clearTimeout(timer);
  }
}
