import express, { type Express, type Router } from 'express';
import type { Logger } from 'winston';
import type { Supervisor } from '../runtime/supervisor.js';
import type { ToolServerStatus } from '../runtime/tool-runner.js';
import type { ApiKeyGuard } from './api-keys.js';
import { createChatRoute, type ChatRouteDeps } from './chat-route.js';
import { createErrorHandler, notFoundHandler } from './error-handler.js';
import { createHealthRoute } from './health-route.js';
import { createModelsRouter } from './models-route.js';
import { createRequestLogging } from './request-logging.js';

/** What the HTTP app is built from. */
export type AppDeps = {
  supervisor: Supervisor;
  logger: Logger;
  /** The /auth/idp routes (OAuth for per-user tool accounts). */
  authRouter: Router;
  /** The API key middleware (`auth.api_keys`). */
  apiKeys: ApiKeyGuard;
  /** The /v1/agents routes (they sit behind `apiKeys.requireKey` themselves). */
  agentsRouter: Router;
  /** Each configured tool server's status, for /health. */
  toolStatus: () => Record<string, ToolServerStatus>;
  bodyLimit: string;
  maxMessages: number;
  defaults: ChatRouteDeps['defaults'];
  llm: { baseUrl: string; apiKey: string; healthTimeoutMs: number };
  /** The port the service listens on, read when /health answers. */
  port: () => number;
  /** The /v1/webhooks routes (subscriptions, delivery log). */
  webhooksRouter: Router;
};

/** Builds the Express app: routes, JSON parsing with a size limit, and the one error mapping. */
export function createApp(deps: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(createRequestLogging(deps.logger));
  // Before the body is read: an unauthenticated request costs no parsing.
  app.use(deps.apiKeys.authenticate);
  // Any content type is read as JSON: curl without -H still works.
  app.use(express.json({ limit: deps.bodyLimit, type: () => true, strict: false }));
  app.get(
    '/health',
    createHealthRoute({
      llmBaseUrl: deps.llm.baseUrl,
      llmApiKey: deps.llm.apiKey,
      timeoutMs: deps.llm.healthTimeoutMs,
      port: deps.port,
      toolStatus: deps.toolStatus,
    }),
  );
  app.post('/v1/chat/completions', createChatRoute({ supervisor: deps.supervisor, defaults: deps.defaults, maxMessages: deps.maxMessages }));
  app.use(createModelsRouter());
  app.use(deps.agentsRouter);
  // Subscriptions hold secrets: like the agents, they always need a key.
  app.use('/v1/webhooks', deps.apiKeys.requireKey);
  app.use(deps.webhooksRouter);
  app.use(deps.authRouter);
  app.use(notFoundHandler);
  app.use(createErrorHandler(deps.logger));
  return app;
}
