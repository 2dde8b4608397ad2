import express, { type Express, type RequestHandler, type Router } from 'express';
import type { Logger } from 'winston';
import type { ServiceMetrics } from '../../runtime/observability/metrics.js';
import type { Supervisor } from '../../runtime/sessions/supervisor.js';
import type { IdempotencyKeys } from '../../runtime/idempotency/idempotency-keys.js';
import type { ToolServerStatus } from '../../runtime/tools/tool-runner.js';
import type { ApiKeyGuard } from '../http/api-keys.js';
import { createChatRoute, type ChatRouteDeps } from '../chat/chat-route.js';
import { createErrorHandler, notFoundHandler } from '../http/error-handler.js';
import type { ServerReport } from '../../runtime/llm/server-profile.js';
import { createHealthRoute } from '../operations/health-route.js';
import { createIgnoredToolsNotice } from '../http/hosted-tools.js';
import { loopbackOnly } from '../http/loopback-only.js';
import { createMetricsRoute } from '../operations/metrics-route.js';
import { createModelsRouter } from '../operations/models-route.js';
import { createRequestLogging } from '../http/request-logging.js';
import { createRequestMetrics } from '../http/request-metrics.js';
import { createRequestTracing } from '../http/request-tracing.js';
import type { Tracing } from '../../runtime/observability/tracing.js';
import { holdToTextRules } from '../http/text-rules.js';
import { A2A_PATH, AGENT_CARD_PATH } from '../a2a/agent-card.js';
import type { UsageLimiter } from '../http/usage-limits.js';

/** What the HTTP app is built from. */
export type AppDeps = {
  supervisor: Supervisor;
  logger: Logger;
  /** The /auth/idp routes (OAuth for per-user tool accounts). */
  authRouter: Router;
  /** The API key middleware (`auth.api_keys`). */
  apiKeys: ApiKeyGuard;
  /** The Responses API: `POST /v1/responses`, and its other /v1/responses routes. */
  responses: { create: RequestHandler; router: Router };
  /** The Conversations API's /v1/conversations routes. */
  conversationsRouter: Router;
  /** The /v1/agents routes (they sit behind `apiKeys.requireKey` themselves). */
  agentsRouter: Router;
  /** `GET /v1/usage`. */
  usageRouter: Router;
  /** Each configured tool server's status, for /health. */
  toolStatus: () => Record<string, ToolServerStatus>;
  /** What the service still starts in the background, for /health. */
  starting: () => string[];
  bodyLimit: string;
  maxMessages: number;
  /** Per-user limits on chat requests (`limits.*`). */
  limiter: UsageLimiter;
  /** Requests' `Idempotency-Key`s (chat completions; the Responses API gets them with its routes). */
  idempotencyKeys?: IdempotencyKeys;
  defaults: ChatRouteDeps['defaults'];
  llm: { baseUrl: string; apiKey: string; healthTimeoutMs: number; server: () => ServerReport };
  /** The port the service listens on, read when /health answers. */
  port: () => number;
  /** The /v1/webhooks routes (subscriptions, delivery log). */
  webhooksRouter: Router;
  /** Prometheus metrics (`metrics.enabled`); without them there is no /metrics and nothing is counted. */
  metrics?: ServiceMetrics;
  /** The /inspect routes: the page shell is public, its data routes check the key themselves. */
  inspectRouter: Router;
  /** `/mcp`, the agent as an MCP server (it reads its own body, to answer a bad one in JSON-RPC). */
  mcpRouter: Router;
  /** The A2A server: the public agent card, and the JSON-RPC endpoint (at `A2A_PATH`). */
  a2a: { card: RequestHandler; rpc: Router };
  /** Where request spans go (tracing on); none: no span is made. */
  tracing?: Tracing;
};

/** Builds the Express app: routes, JSON parsing with a size limit, and the one error mapping. */
export function createApp(deps: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(createRequestLogging(deps.logger));
  if (deps.tracing) app.use(createRequestTracing(deps.tracing));
  // Before the key check and the body parser: the requests they refuse are counted too.
  if (deps.metrics) app.use(createRequestMetrics(deps.metrics));
  // Without API keys nothing tells users apart: every user's transcripts and live events
  // (/inspect) and the metrics stay on this machine.
  if (!deps.apiKeys.enabled) {
    app.use('/inspect', loopbackOnly('The inspector (/inspect)'));
    app.use('/metrics', loopbackOnly('/metrics'));
  }
  // Before the key check: a browser cannot send a key when it loads a page. Mounted on its
  // path, so the other requests pass one layer here, not each of its routes.
  app.use('/inspect', deps.inspectRouter);
  // Public, as the A2A specification requires: it says which credential the endpoint needs.
  app.use(AGENT_CARD_PATH, deps.a2a.card);
  // Before the body is read: an unauthenticated request costs no parsing.
  app.use(deps.apiKeys.authenticate);
  // The protocols' endpoints sit behind the key like every route, and read their own bodies
  // (before the JSON parser, whose errors are not JSON-RPC's).
  app.use(deps.mcpRouter);
  app.use(A2A_PATH, deps.a2a.rpc);
  // Any content type is read as JSON: curl without -H still works.
  app.use(express.json({ limit: deps.bodyLimit, type: () => true, strict: false }));
  // Right after the body is read, before any route: what reaches the database or the model keeps one rule.
  app.use(holdToTextRules);
  app.get(
    '/health',
    createHealthRoute({
      llmBaseUrl: deps.llm.baseUrl,
      llmApiKey: deps.llm.apiKey,
      timeoutMs: deps.llm.healthTimeoutMs,
      llmProfile: deps.llm.server,
      port: deps.port,
      toolStatus: deps.toolStatus,
      starting: deps.starting,
    }),
  );
  // Open in local mode like /health; with API keys set, `authenticate` above asks Prometheus for its bearer token.
  if (deps.metrics) app.get('/metrics', createMetricsRoute(deps.metrics));
  const ignoredToolsNotice = createIgnoredToolsNotice(deps.logger);
  app.post(
    '/v1/chat/completions',
    ignoredToolsNotice,
    createChatRoute({ supervisor: deps.supervisor, limiter: deps.limiter, defaults: deps.defaults, maxMessages: deps.maxMessages, idempotencyKeys: deps.idempotencyKeys }),
  );
  app.post('/v1/responses', ignoredToolsNotice, deps.responses.create);
  app.use(deps.responses.router);
  app.use(deps.conversationsRouter);
  app.use(createModelsRouter());
  app.use(deps.agentsRouter);
  app.use(deps.usageRouter);
  // Subscriptions hold secrets: like the agents, they always need a key.
  app.use('/v1/webhooks', deps.apiKeys.requireKey);
  app.use(deps.webhooksRouter);
  app.use(deps.authRouter);
  app.use(notFoundHandler);
  app.use(createErrorHandler(deps.logger));
  return app;
}
