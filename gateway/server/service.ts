import type { Server } from 'node:http';
import type { AddressInfo, ListenOptions } from 'node:net';
import type { Logger } from 'winston';
import { ConfigError, type AppConfig } from '../../config/load-config.js';
import { tracingSettingsOf } from '../../config/tracing-settings.js';
import { startTracing } from '../../runtime/observability/start-tracing.js';
import { loadGraph } from '../../config/load-graph.js';
import { formatWarning } from '../../machines/index.js';
import { DurableWriter } from '../../runtime/sessions/durable-writer.js';
import { EventBus } from '../../runtime/observability/event-bus.js';
import { asksLlmServer, chooseEmbedder, type EmbedderOptions } from '../../runtime/llm/embedder.js';
import { createLlmClient } from '../../runtime/llm/llm-client.js';
import { normaliseWord } from '../../runtime/tools/approval-words.js';
import { createMcpRegistry } from '../../runtime/tools/mcp-registry.js';
import { createDeferredMemory } from '../../runtime/memory/deferred-memory.js';
import type { LongTermMemory } from '../../runtime/memory/long-term-memory.js';
import type { EmbedderRecordStore, VectorMemoryStore } from '../../runtime/ports.js';
import { createVectorMemory } from '../../runtime/memory/vector-memory.js';
import { SessionLeases } from '../../runtime/sessions/session-leases.js';
import { AbandonedTurns } from '../../runtime/sessions/abandoned-turns.js';
import { ServiceMetrics } from '../../runtime/observability/metrics.js';
import type { Supervisor, SupervisorSettings } from '../../runtime/sessions/supervisor.js';
import { createXStateInspector } from '../../runtime/observability/xstate-inspector.js';
import { createSessionLeaseRepository } from '../../storage/session-lease-repository.js';
import { createDatabase, createStores, migrateToLatest, type CreateDatabaseOptions, type Database } from '../../storage/index.js';
import { createAgentsRouter, createHistoryHandlers } from '../agents/agents-routes.js';
import { BackgroundRuns } from '../../runtime/responses/background-runs.js';
import { IdempotencyKeys } from '../../runtime/idempotency/idempotency-keys.js';
import { newHolderId } from '../../runtime/sessions/process-identity.js';
import { createResponsesRoutes } from '../responses/responses-routes.js';
import { createA2ARoutes } from '../a2a/a2a-routes.js';
import { createConversationsRouter } from '../conversations/conversations-routes.js';
import { createApiKeyGuard } from '../http/api-keys.js';
import { createApp } from './app.js';
import { answerClientErrors } from '../http/client-errors.js';
import { acceptHandedConnections } from './connection-handoff.js';
import { drainServer, watchConnections } from './drain-server.js';
import { createInspectRoutes } from '../inspect/inspect-routes.js';
import { RequestSupervisor } from '../http/request-supervisor.js';
import { toolServersLine } from './start-line.js';
import { OpenedParts } from './opened-parts.js';
import { StartupWork } from './startup-work.js';
import { createUsageRouter } from '../operations/usage-route.js';
import { createUsageLimiter } from '../http/usage-limits.js';
import { hasBudgets } from '../../config/budget-schema.js';
import { TokenBudgets } from '../../runtime/usage/token-budgets.js';
import { WebhookDispatcher } from '../../runtime/webhooks/webhook-dispatcher.js';
import { createWebhookRepository } from '../../storage/webhook-repository.js';
import { createCallRepository } from '../../storage/call-repository.js';
import { CallLog } from '../../runtime/observability/call-log.js';
import { createWebhooksRouter } from '../webhooks/webhooks-routes.js';
import { logRuntimeEvents } from './log-events.js';
import { createOAuthSetup, type OAuthSetup } from '../auth/oauth-setup.js';
import { createMcpRoutes } from '../mcp/mcp-routes.js';
import { createNotificationChannel } from '../../storage/notification-channel.js';
import { warnWhenNotificationsAreLost } from './notification-check.js';

/** At shutdown, how long cancelled turns may take to store how they ended. */
const CANCELLED_TURNS_WAIT_MS = 5_000;

/** Least time between two progress notifications of an MCP tool call: a few a second read as streaming. */
const MCP_PROGRESS_INTERVAL_MS = 100;

/** How long an approval asked through MCP elicitation waits for the user: a person answers, not a program. */
const MCP_ELICITATION_TIMEOUT_MS = 10 * 60_000;

/** At shutdown, the least time the writes still queued get to commit, however long the requests took to end. */
const WRITE_FLUSH_FLOOR_MS = 5_000;

/** At shutdown, how long the spans still queued may take to reach the collector. */
const TRACING_SHUTDOWN_MS = 5_000;

/** A running service. */
export type RunningService = {
  /** Base URL, e.g. http://127.0.0.1:1111 (the OpenAI base URL is this plus /v1). */
  url: string;
  port: number;
  server: Server;
  supervisor: Supervisor;
  events: EventBus;
  database: Database;
  writer: DurableWriter;
  /**
   * Settles once the work the service goes on with in the background after it listens has
   * (what /health lists under `starting`: the tool servers' first connections, the choice of
   * long-term memory's embedder); never rejects.
   */
  started: Promise<void>;
  close(): Promise<void>;
};

/** How the service gets its connections: from its own port (the default), or handed over by a cluster primary. */
export type ServiceOptions = { handedConnections?: { publicPort: number } };

/**
 * The composition root: opens storage, builds the runtime and the app, and listens. A start
 * that fails closes what it had opened, the last first, and rejects with its error.
 */
export async function startService(config: AppConfig, logger: Logger, options: ServiceOptions = {}): Promise<RunningService> {
  const opened = new OpenedParts(logger);
  try {
    return await openService(config, logger, options, opened);
  } catch (error) {
    await opened.closeAll();
    throw error;
  }
}

/** Starts the service, noting in `opened` each part it opens until it runs (then its `close` closes them). */
async function openService(config: AppConfig, logger: Logger, options: ServiceOptions, opened: OpenedParts): Promise<RunningService> {
  const timeouts = httpTimeoutsOf(config);
  const { graph, warnings: graphWarnings } = loadGraph(config.state.graph_path);
  for (const warning of graphWarnings) logger.warn(`state graph ${config.state.graph_path}: ${formatWarning(warning).trim()}`);
  const apiKeys = createApiKeyGuard({ apiKeys: config.auth.api_keys, metricsToken: config.metrics.token });
  if (config.metrics.token && !apiKeys.enabled) {
    logger.warn('metrics.token (METRICS_TOKEN) is set but no API keys are (API_KEYS): the token is not read, and /metrics answers clients on this machine only');
  }
  // Checked before anything opens; it connects once the service listens.
  const inspector = config.inspect.websocket_url
    ? await createXStateInspector({
        url: config.inspect.websocket_url,
        autoStart: false,
        onError: (error) => logger.warn(`XState inspector: an event was not sent: ${error.message}`),
      })
    : undefined;
  const vector = config.memory.use_long_term;
  const events = new EventBus();
  const database = await createDatabase({
    ...databaseOptionsOf(config),
    onConnectionWait: (durationMs) => events.emit('turn:stage', { stage: 'connection_wait', durationMs }),
    onIdleError: (error) => logger.warn(`database connection lost: ${error.message}`),
    onMaintenanceError: (error) => logger.warn(`analyzing the embedded database failed: ${error.message}`),
  });
  opened.add('the database', () => database.close());
  await migrateToLatest(database, { vector, embeddingDimensions: config.memory.embedding_dimensions });
  const stores = createStores(database, { memory: { efSearch: config.memory.hnsw_ef_search } });
  const stopLogging = logRuntimeEvents(events, logger);
  opened.add('the runtime events log', stopLogging);
  const oauth: OAuthSetup = createOAuthSetup({
    oauth: config.oauth,
    publicUrl: config.app.public_url,
    tokens: stores.tokens,
    states: stores.oauthStates,
    events,
    requireLoginProof: apiKeys.enabled,
  });
  const writer = new DurableWriter(events);
  // Writes a failed start queued (a lease, a count) are not retried past it.
  opened.add('the durable writer', () => writer.close());
  const startup = new StartupWork();
  // Stops what still starts in the background when the service stops.
  const stopStartup = new AbortController();
  opened.add('the start-up work', async () => {
    stopStartup.abort(new Error('the service failed to start'));
    await startup.settled();
  });
  const memory: LongTermMemory | undefined =
    stores.memories && stores.memoryEmbedder ? await createMemory(config, stores.memories, stores.memoryEmbedder, { events, logger, signal: stopStartup.signal }) : undefined;
  if (memory) startup.add('long_term_memory', memory.ready());
  const tools = createMcpRegistry({
    servers: config.mcp_servers,
    connectTimeoutMs: config.tools.connect_timeout_ms,
    callTimeoutMs: config.tools.call_timeout_ms,
    userProcessIdleMs: config.tools.user_process_idle_ms,
    tokens: oauth.vault,
    events,
    logger,
  });
  opened.add('the tool servers', () => tools.close());
  // Connects every tool server in parallel, each within its time-out, while the service starts
  // listening; failures retry in the background. A turn waits for these first attempts.
  startup.add('mcp_servers', tools.start());
  if (Object.keys(config.mcp_servers).length > 0) {
    // One count for the log and /health: the registry's status, not each server's raw list.
    void tools.start().then(() => {
      if (stopStartup.signal.aborted) return;
      const status = tools.status();
      const servers = Object.fromEntries(Object.entries(status).map(([name, server]) => [name, { status: server.status, tools: server.tools }]));
      logger.info(toolServersLine(status), { servers });
    });
  }
  const llm = createLlmClient({
    baseUrl: config.llm.base_url,
    apiKey: config.llm.api_key,
    timeoutMs: config.llm.timeout_ms,
    maxConnections: config.llm.max_connections,
    maxRetries: config.llm.max_retries,
    maxTokensLimit: config.llm.max_tokens_limit,
    model: config.llm.model,
    probeTimeoutMs: config.llm.health_timeout_ms,
    server: { contextWindow: config.llm.context_window, toolCallParser: config.llm.tool_call_parser, alternateRoles: config.llm.alternate_roles },
  });
  opened.add('the LLM client', () => llm.close());
  // What the LLM server tells of itself (its context window first of all) is asked while the service starts; a call waits for it briefly.
  void llm.probe();
  // The embedded database serves one process: only PostgreSQL can be shared by several.
  const leases =
    database.kind === 'pg'
      ? new SessionLeases({
          store: createSessionLeaseRepository(database),
          writer,
          settings: { leaseMs: config.sessions.lease_ms },
          onLost: (sessionId) => {
            const userId = supervisor.registry.getSnapshot().context.sessions.get(sessionId)?.userId;
            logger.warn(`session ${sessionId}: its lease lapsed and another process took it; its actor here is dropped`, { sessionId, userId });
            supervisor.distrust(sessionId);
          },
          // Another worker or instance got a request for a session cached here: it gets the session as soon as its turn here ends.
          onHandoverAsked: (sessionId) => supervisor.distrust(sessionId),
          onRenewError: (error) => logger.warn(`renewing session leases failed: ${error.message}`),
        })
      : undefined;
  const calls = new CallLog(
    { perSession: config.inspect.recent_calls_per_session, total: config.inspect.recent_calls },
    config.inspect.store_calls ? createCallRepository(database.db) : undefined,
  );
  // Tracing on (an OTLP endpoint set): the SDK is loaded now; off, never.
  const tracingSettings = tracingSettingsOf(config);
  const tracing = tracingSettings ? await startTracing(tracingSettings, (message) => logger.warn(`tracing: spans may not have been sent: ${message}`)) : undefined;
  if (tracing) opened.add('tracing', () => tracing.shutdown(TRACING_SHUTDOWN_MS));
  // No budget set: nothing is counted and nothing is checked on the turn path.
  const budgets = hasBudgets(config.budgets) ? new TokenBudgets({ config: config.budgets, store: stores.tokenUsage, writer, events }) : undefined;
  const supervisor = new RequestSupervisor({
    budgets,
    tracing,
    calls,
    leases,
    inspect: inspector?.inspect,
    graph,
    llm,
    conversations: stores.conversations,
    sessions: stores.sessions,
    steps: stores.turnSteps,
    writer,
    events,
    memory,
    tools,
    settings: supervisorSettingsOf(config),
  });
  opened.add('the session actors', () => supervisor.stop());
  // Requests for sessions cached by another process are heard before the first request is served.
  if (leases) opened.add('the session leases', () => leases.close());
  await leases?.ready();
  const webhookStore = createWebhookRepository(database.db);
  const webhookPolicy = { allowHttp: config.webhooks.allow_http, allowPrivateTargets: config.webhooks.allow_private_targets };
  const webhooks = new WebhookDispatcher({
    events,
    store: webhookStore,
    writer,
    logger,
    settings: {
      ...webhookPolicy,
      maxAttempts: config.webhooks.max_attempts,
      initialBackoffMs: config.webhooks.initial_backoff_ms,
      maxBackoffMs: config.webhooks.max_backoff_ms,
      timeoutMs: config.webhooks.timeout_ms,
      pollMs: config.webhooks.poll_ms,
    },
  });
  const metrics = config.metrics.enabled ? new ServiceMetrics({ events, supervisor, webhooks: webhookStore }) : undefined;
  if (metrics) opened.add('the metrics', () => metrics.close());
  const inspectRoutes = createInspectRoutes({
    enabled: config.inspect.page,
    registry: supervisor.registry,
    sessions: stores.sessions,
    conversations: stores.conversations,
    events,
    graph,
    authenticate: apiKeys.authenticate,
    history: createHistoryHandlers({ sessions: stores.sessions, conversations: stores.conversations, calls }),
    recentSessions: config.inspect.recent_sessions,
    traceUrl: config.inspect.trace_url,
  });
  const backgroundRuns = new BackgroundRuns({
    store: stores.backgroundResponses,
    leaseMs: config.sessions.lease_ms,
    maxAttempts: config.sessions.max_turn_attempts,
    eventRetentionMs: config.responses.event_retention_ms,
    onError: (error) => logger.warn(`background responses: ${error.message}`),
  });
  opened.add('the background responses', () => backgroundRuns.stop(0));
  // Foreground turns whose process died before they answered, and that no request came to finish.
  const abandonedTurns = new AbandonedTurns({
    supervisor,
    steps: stores.turnSteps,
    leaseMs: config.sessions.lease_ms,
    quietMs: config.sessions.abandoned_after_ms,
    leases: leases !== undefined,
    maxAttempts: config.sessions.max_turn_attempts,
    onError: (error) => logger.warn(`finishing an abandoned turn: ${error.message}`),
  });
  const idempotencyKeys = new IdempotencyKeys(
    stores.idempotencyKeys,
    newHolderId(),
    { ttlMs: config.sessions.idempotency_ttl_s * 1000, leaseMs: config.sessions.lease_ms },
    (what, error) => logger.warn(`idempotency keys: could not ${what}: ${error instanceof Error ? error.message : String(error)}`),
  );
  opened.add('the idempotency keys', () => idempotencyKeys.stop());
  let port = config.app.port;
  const limiter = createUsageLimiter(config.limits, logger, budgets);
  const defaults = {
    userId: config.memory.user_id,
    llmModel: config.llm.model,
    temperature: config.llm.temperature,
    maxTokens: config.llm.max_tokens,
  };
  const responses = createResponsesRoutes({
    supervisor,
    responses: stores.responses,
    background: stores.backgroundResponses,
    runs: backgroundRuns,
    onError: (error) => logger.warn(`background response: ${error.message}`),
    sessions: stores.sessions,
    limiter,
    defaults,
    maxMessages: config.app.max_messages,
    idempotencyKeys,
  });
  // A2A tasks are background responses, started and read as the Responses API's are.
  const a2a = createA2ARoutes({
    supervisor,
    responses: stores.responses,
    background: stores.backgroundResponses,
    runs: backgroundRuns,
    onError: (error) => logger.warn(`A2A task: ${error.message}`),
    sessions: stores.sessions,
    limiter,
    startBackground: responses.startBackground,
    approvalWords: supervisorSettingsOf(config).approvalWords,
    cardSource: { graph, tools: () => tools.definitions(), needsKey: apiKeys.enabled },
    bodyLimit: config.app.body_limit,
    defaultUserId: defaults.userId,
  });
  const mcp = createMcpRoutes({
    supervisor,
    limiter,
    defaults,
    defaultUserId: defaults.userId,
    approvalWords: supervisorSettingsOf(config).approvalWords,
    progressIntervalMs: MCP_PROGRESS_INTERVAL_MS,
    elicitationTimeoutMs: MCP_ELICITATION_TIMEOUT_MS,
    onError: (error) => logger.error(`MCP tool call failed: ${error.message}`, { stack: error.stack }),
    graph,
    // MCP clients' answers to elicitations reach the worker or instance whose call asked.
    followUps: createNotificationChannel(database, 'svc_mcp_follow_ups'),
    sessions: stores.sessions,
    deletion: { supervisor, sessions: stores.sessions, conversations: stores.conversations, memories: stores.memories, calls, steps: stores.turnSteps },
    bodyLimit: config.app.body_limit,
  });
  opened.add('the MCP endpoint', () => mcp.close());
  const app = createApp({
    tracing,
    supervisor,
    logger,
    toolStatus: () => tools.status(),
    starting: () => startup.starting(),
    authRouter: oauth.router,
    apiKeys,
    agentsRouter: createAgentsRouter({
      supervisor,
      sessions: stores.sessions,
      conversations: stores.conversations,
      memories: stores.memories,
      calls,
      steps: stores.turnSteps,
      tools,
      requireKey: apiKeys.requireKey,
      settings: {
        model: config.llm.model,
        shortTermTurns: config.memory.short_term_turns,
        initialState: graph.initial,
        exportDir: config.agents.export_dir,
      },
    }),
    usageRouter: createUsageRouter({ sessions: stores.sessions, budgets, requireKey: apiKeys.requireKey }),
    bodyLimit: config.app.body_limit,
    maxMessages: config.app.max_messages,
    limiter,
    defaults,
    idempotencyKeys,
    responses,
    conversationsRouter: createConversationsRouter({
      supervisor,
      sessions: stores.sessions,
      conversations: stores.conversations,
      memories: stores.memories,
      calls,
      steps: stores.turnSteps,
      events,
      defaultUserId: defaults.userId,
    }),
    llm: { baseUrl: config.llm.base_url, apiKey: config.llm.api_key, healthTimeoutMs: config.llm.health_timeout_ms, server: () => llm.server() },
    port: () => port,
    webhooksRouter: createWebhooksRouter({ store: webhookStore, policy: webhookPolicy, onChange: () => webhooks.refresh() }),
    metrics,
    inspectRouter: inspectRoutes.router,
    mcpRouter: mcp.router,
    a2a,
  });
  // Responses left running by a process that stopped are taken over now (the routes know how to
  // continue them), not at the first sweep; on the embedded database, which one process opens at
  // a time, that is every one left running.
  await backgroundRuns.settleLapsed(database.kind === 'pglite');
  const handedOver = options.handedConnections;
  // A worker's own port is on loopback, only so that Node tracks the connections it is handed.
  const server = handedOver
    ? await listen(app, { port: 0, host: '127.0.0.1', exclusive: true }, timeouts)
    : await listen(app, { port: config.app.port, host: config.app.host }, timeouts);
  const watched = watchConnections(server);
  const handed = handedOver ? acceptHandedConnections(server) : undefined;
  opened.add('the HTTP server', () => new Promise<void>((resolve) => server.close(() => resolve())));
  port = handedOver ? handedOver.publicPort : (server.address() as AddressInfo).port;
  inspector?.start();
  if (inspector) opened.add('the XState inspector link', () => inspector.stop());
  abandonedTurns.start();
  opened.add('the sweep of abandoned turns', () => abandonedTurns.stop());
  // Deliveries left pending by an earlier run go out now.
  opened.add('the webhook dispatcher', () => webhooks.stop());
  await webhooks.start();
  // Not part of `started`: a pooler that loses notifications takes the whole wait to tell.
  const notificationCheck =
    database.kind === 'pg'
      ? warnWhenNotificationsAreLost(database, { listenUrlSet: config.database.listen_url !== '', logger, signal: stopStartup.signal })
      : Promise.resolve();
  const host = config.app.host === '0.0.0.0' || config.app.host === '::' ? '127.0.0.1' : config.app.host;

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      // The stop's one bound: requests and the writes after them share app.shutdown_timeout_ms, the writes getting at least WRITE_FLUSH_FLOOR_MS.
      const stopDeadline = Date.now() + config.app.shutdown_timeout_ms;
      const writesWithin = () => Math.max(stopDeadline - Date.now(), WRITE_FLUSH_FLOOR_MS);
      inspectRoutes.close();
      idempotencyKeys.stop();
      await abandonedTurns.stop();
      // Background responses get the same time to end as requests; those still running then are stored as failed.
      const [{ forced }] = await Promise.all([drainServer(server, config.app.shutdown_timeout_ms, { handed, watched }), backgroundRuns.stop(config.app.shutdown_timeout_ms)]);
      if (forced) logger.warn(`requests still running after ${config.app.shutdown_timeout_ms} ms were cut; their turns are cancelled and stored`);
      // Cut requests cancel their turns; each still stores how it ended.
      await supervisor.stop(CANCELLED_TURNS_WAIT_MS);
      // Tool servers still connecting are stopped by tools.close(); the embedder probe by this.
      stopStartup.abort(new Error('the service is stopping'));
      inspector?.stop();
      await tools.close();
      await startup.settled();
      await notificationCheck;
      await llm.close();
      // A write that keeps failing (the database gone) does not hold the stop: what is left is told and dropped.
      const unwritten = await writer.flush(writesWithin());
      // After the flush every event of the run is in the outbox; what is not sent stays pending.
      await webhooks.stop();
      if (unwritten.size === 0) for (const [operation, count] of await writer.flush(writesWithin())) unwritten.set(operation, count);
      if (unwritten.size > 0) logger.error(unwrittenLine(unwritten, config.app.shutdown_timeout_ms));
      // Every lease was given back through the writer; none is renewed from now on.
      await leases?.close();
      await mcp.close();
      writer.close();
      stopLogging();
      metrics?.close();
      // The last spans (the cut requests', the cancelled turns') are sent, within a bound.
      await tracing?.shutdown(TRACING_SHUTDOWN_MS);
      await database.close();
    })());

  return { url: `http://${host}:${port}`, port, server, supervisor, events, database, writer, started: startup.settled(), close };
}

/** The line that tells which writes a stop gave up on: how many, of what. */
function unwrittenLine(unwritten: Map<string, number>, shutdownMs: number): string {
  const total = [...unwritten.values()].reduce((sum, count) => sum + count, 0);
  const what = [...unwritten].map(([operation, count]) => `${count} × ${operation}`).join(', ');
  return `${total} write${total === 1 ? '' : 's'} not stored: the database did not take ${total === 1 ? 'it' : 'them'} within the stop's time (app.shutdown_timeout_ms, ${shutdownMs} ms): ${what}`;
}

/** The supervisor's settings from the service's configuration. */
export function supervisorSettingsOf(config: AppConfig): SupervisorSettings {
  return {
    systemPrompt: config.app.system_prompt,
    shortTermTurns: config.memory.short_term_turns,
    maxToolRounds: config.state.max_tool_rounds,
    maxHandoffs: config.state.max_handoffs,
    cacheSize: config.sessions.cache_size,
    idleMs: config.sessions.idle_ms,
    turnWaitMs: config.sessions.turn_wait_ms,
    writeWaitMs: config.sessions.write_wait_ms,
    heartbeatMs: config.tools.heartbeat_ms,
    failureMode: config.llm.failure_mode,
    approvalWords: { approve: config.tools.approval_words.map(normaliseWord), deny: config.tools.denial_words.map(normaliseWord) },
  };
}

/** The database the configuration describes, as the service opens it (and `svc-agent db migrate` and `memory reembed`). */
export function databaseOptionsOf(config: AppConfig): CreateDatabaseOptions {
  return {
    url: config.database.url,
    listenUrl: config.database.listen_url,
    dataDir: config.database.data_dir,
    vector: config.memory.use_long_term,
    poolSize: config.database.pool_size,
    sharedBuffersMb: config.database.embedded_shared_buffers_mb,
  };
}

/** The embeddings link the configuration describes (the service's, and `svc-agent memory reembed`'s). */
export function embedderOptionsOf(config: AppConfig): EmbedderOptions {
  return {
    mode: config.memory.embeddings as EmbedderOptions['mode'],
    baseUrl: config.llm.base_url,
    apiKey: config.llm.api_key,
    model: config.llm.embedding_model,
    dimensions: config.memory.embedding_dimensions,
    timeoutMs: config.memory.embeddings_timeout_ms,
  };
}

/**
 * Long-term memory with the embedder the configuration and the stored memories call for. Its
 * choice is made now when it only reads the record (an embedder at odds with the stored
 * memories is a ConfigError that stops the start); asking the LLM server (`auto`, nothing
 * recorded yet) goes on in the background, and turns wait for it. A failure there is logged,
 * and turns answer MEMORY_UNAVAILABLE.
 */
async function createMemory(
  config: AppConfig,
  store: VectorMemoryStore,
  records: EmbedderRecordStore,
  context: { events: EventBus; logger: Logger; signal: AbortSignal },
): Promise<LongTermMemory> {
  const { events, logger, signal } = context;
  const options = embedderOptionsOf(config);
  const choose = async () => {
    const { embedder, reason } = await chooseEmbedder(options, records, signal);
    logger.info(`long-term memory on, embeddings: ${embedder.source} (${reason})`);
    return createVectorMemory({ store, embedder, events, results: config.memory.long_term_results });
  };
  if (!asksLlmServer(options, await records.get())) return choose();
  return createDeferredMemory(() =>
    choose().catch((error: Error) => {
      if (!signal.aborted) logger.error(`long-term memory is unavailable: ${error.message}`);
      throw error;
    }),
  );
}

/** The HTTP server's time-outs, in ms (`app.keep_alive_timeout_ms`, `app.headers_timeout_ms`). */
type HttpTimeouts = { keepAliveMs: number; headersMs: number };

function httpTimeoutsOf(config: AppConfig): HttpTimeouts {
  const { keep_alive_timeout_ms: keepAliveMs, headers_timeout_ms: headersMs } = config.app;
  // Node's advice: a request's headers may take longer than a connection may idle.
  if (headersMs <= keepAliveMs) {
    throw new ConfigError(`app.headers_timeout_ms (${headersMs}) must exceed app.keep_alive_timeout_ms (${keepAliveMs})`);
  }
  return { keepAliveMs, headersMs };
}

/**
 * The HTTP server of the app, listening. A cluster worker's serves the connections the primary
 * hands it (gateway/server/connection-handoff.ts) with these same time-outs.
 */
function listen(app: ReturnType<typeof createApp>, where: ListenOptions, timeouts: HttpTimeouts): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = app.listen(where);
    // Node closes idle connections after 5 s, sooner than clients and proxies stop reusing
    // theirs: one that sends a request as the service closes gets a reset ("fetch failed").
    server.keepAliveTimeout = timeouts.keepAliveMs;
    server.headersTimeout = timeouts.headersMs;
    answerClientErrors(server);
    server.once('listening', () => resolve(server));
    server.once('error', reject);
  });
}
