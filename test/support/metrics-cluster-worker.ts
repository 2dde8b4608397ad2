import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import winston from 'winston';
import { createErrorHandler } from '../../gateway/http/error-handler.js';
import { createMetricsRoute } from '../../gateway/operations/metrics-route.js';
import { EventBus } from '../../runtime/observability/event-bus.js';
import { ServiceMetrics } from '../../runtime/observability/metrics.js';
import { createSessionRegistry } from '../../runtime/sessions/session-registry.js';

/**
 * A cluster worker for the /metrics aggregation tests: service metrics with TURNS finished
 * turns, CACHED_ACTORS actors and a webhook backlog of BACKLOG, served at /metrics by the
 * route the service uses. It tells the primary its port once it listens.
 */
export type MetricsWorkerReady = { metricsPort: number };

const events = new EventBus();
const metrics = new ServiceMetrics({
  events,
  supervisor: { registry: createSessionRegistry(), cachedActors: Number(process.env.CACHED_ACTORS) },
  webhooks: { countPending: async () => Number(process.env.BACKLOG) },
});
for (let turn = 0; turn < Number(process.env.TURNS); turn += 1) {
  events.emit('turn:completed', { sessionId: `s${turn}`, userId: 'u', durationMs: 1, outcome: 'ok', usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } });
}

const app = express();
app.get('/metrics', createMetricsRoute(metrics));
app.use(createErrorHandler(winston.createLogger({ silent: true })));
const server = createServer(app);
// A port of its own (not one shared through the primary), so a test can ask this worker.
server.listen({ port: 0, host: '127.0.0.1', exclusive: true }, () => {
  process.send!({ metricsPort: (server.address() as AddressInfo).port } satisfies MetricsWorkerReady);
});
