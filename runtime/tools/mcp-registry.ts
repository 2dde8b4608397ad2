import { requiresApproval, type McpServerConfig } from '../../config/mcp-server-schema.js';
import type { ToolCall, ToolDefinition } from '../chat-types.js';
import type { EventBus } from '../observability/event-bus.js';
import type { McpLogger } from './mcp-connection.js';
import { ServerSlot, type RetryPolicy } from './mcp-server-slot.js';
import { buildCatalogue, describeTools, isAllowed, toolDefinition, type CatalogueEntry } from './mcp-tool-catalogue.js';
import { describeCallFailure, errorText, formatToolContent, parseToolArguments } from './mcp-tool-results.js';
import { UserConnectionPool, type ConnectionLease } from './mcp-user-pool.js';
import type { AccessTokenSource } from '../ports.js';
import { isServiceError, ServiceError } from '../service-error.js';
import type { ManagedToolRunner, ToolCallResult, ToolCallScope, ToolServerStatus, ToolSource } from './tool-runner.js';

/**
 * The `_meta` key of every tool call's idempotency key: the session id and the model's call id,
 * the same for every attempt of one call (a server that deduplicates can run it once).
 */
export const IDEMPOTENCY_KEY_META = 'io.svc-agent/idempotency-key';

export type { McpLogger } from './mcp-connection.js';

/** What the MCP tool registry is built from. */
export type McpRegistryOptions = {
  /** `mcp_servers` of the configuration, by server name. */
  servers: Record<string, McpServerConfig>;
  /** `tools.connect_timeout_ms`: bound on starting a server and listing its tools. */
  connectTimeoutMs: number;
  /** `tools.call_timeout_ms`: bound on one call, unless the server sets `timeout_ms`. */
  callTimeoutMs: number;
  /** `tools.user_process_idle_ms`: a per-user connection unused this long is closed. */
  userProcessIdleMs: number;
  /** Per-user servers get the user's access token here; without it their tools need an account that cannot be connected. */
  tokens?: AccessTokenSource;
  events: EventBus;
  logger?: McpLogger;
  /** Back-off of reconnection attempts; 1 s doubling up to 60 s unless given. */
  retry?: Partial<RetryPolicy>;
  /** Grace time of a stdio server to exit after its stdin closes, and again after SIGTERM; 1 s unless given. */
  killGraceMs?: number;
  /** Names the account in TOOL_AUTH_REQUIRED messages ("needs your <label> account"). */
  accountLabel?: string;
};

/** The MCP tool registry: every configured server's tools behind the `ToolRunner` interface. */
export type McpRegistry = ManagedToolRunner;

type ServerHandle = { name: string; config: McpServerConfig; slot: ServerSlot; pool?: UserConnectionPool };

/**
 * Creates the tool registry over the configured MCP servers. Tools are offered as
 * `<server>__<tool>`. Shared servers keep one connection; per-user servers (`per_user`)
 * list their tools through a token-less probe and run each user's calls on that user's own
 * connection (stdio: a process with `MCP_USER_ACCESS_TOKEN`; http: `Authorization: Bearer`).
 */
export function createMcpRegistry(options: McpRegistryOptions): McpRegistry {
  return new Registry(options);
}

class Registry implements McpRegistry {
  private readonly servers = new Map<string, ServerHandle>();
  private catalogue = new Map<string, CatalogueEntry>();
  /** `require_approval` names already reported as missing from their server, as `<server>/<tool>`. */
  private readonly reportedMissing = new Set<string>();
  private started: Promise<void> | undefined;
  private isClosed = false;

  constructor(private readonly options: McpRegistryOptions) {
    const retry: RetryPolicy = { initialMs: options.retry?.initialMs ?? 1000, maxMs: options.retry?.maxMs ?? 60_000 };
    for (const [name, config] of Object.entries(options.servers)) {
      const slot = new ServerSlot(name, config, {
        connectTimeoutMs: options.connectTimeoutMs,
        retry,
        keepConnection: !config.per_user,
        logger: options.logger,
        killGraceMs: options.killGraceMs,
        onToolsChanged: () => this.rebuildCatalogue(),
      });
      const pool = config.per_user
        ? new UserConnectionPool({
            server: name,
            config,
            connectTimeoutMs: options.connectTimeoutMs,
            idleMs: options.userProcessIdleMs,
            logger: options.logger,
            killGraceMs: options.killGraceMs,
          })
        : undefined;
      this.servers.set(name, { name, config, slot, pool });
    }
  }

  start(): Promise<void> {
    this.started ??= Promise.all([...this.servers.values()].map((server) => server.slot.connect())).then(() => {});
    return this.started;
  }

  ready(): Promise<void> {
    // The first attempts, started here if start() was not called.
    return this.start();
  }

  status(): Record<string, ToolServerStatus> {
    const report: Record<string, ToolServerStatus> = {};
    const offered = new Map<string, number>();
    for (const entry of this.catalogue.values()) offered.set(entry.server, (offered.get(entry.server) ?? 0) + 1);
    for (const { name, config, slot, pool } of this.servers.values()) {
      report[name] = {
        status: pool && slot.status === 'connected' ? 'per_user' : slot.status,
        transport: config.transport,
        tools: offered.get(name) ?? 0,
        ...(slot.error ? { error: slot.error } : {}),
        attempts: slot.attempts,
        ...(slot.lastAttempt ? { lastAttempt: slot.lastAttempt.toISOString() } : {}),
        ...(pool ? { users: pool.size } : {}),
      };
    }
    return report;
  }

  async close(): Promise<void> {
    this.isClosed = true;
    await Promise.all([...this.servers.values()].flatMap((server) => [server.slot.close(), server.pool?.close()]));
  }

  definitions(allowed?: string[]): ToolDefinition[] {
    return [...this.catalogue.values()].filter((entry) => isAllowed(entry, allowed)).map(toolDefinition);
  }

  describe(allowed?: string[]): string {
    return describeTools([...this.catalogue.values()].filter((entry) => isAllowed(entry, allowed)));
  }

  approvalFor(name: string, required = false): ToolSource | undefined {
    const entry = this.catalogue.get(name);
    if (!entry) return undefined;
    const server = this.servers.get(entry.server) as ServerHandle;
    return required || requiresApproval(server.config, entry.tool.name) ? { server: entry.server, tool: entry.tool.name } : undefined;
  }

  isRepeatable(name: string): boolean {
    const entry = this.catalogue.get(name);
    if (!entry) return false;
    const hints = entry.tool.annotations;
    return (this.servers.get(entry.server) as ServerHandle).config.idempotent || hints?.readOnlyHint === true || hints?.idempotentHint === true;
  }

  async call(toolCall: ToolCall, scope: ToolCallScope): Promise<ToolCallResult> {
    const name = toolCall.function.name;
    const result = (content: string, isError: boolean): ToolCallResult => ({ toolCallId: toolCall.id, name, content, isError });
    if (this.isClosed) return result('Error: tools are unavailable because the service is shutting down', true);
    const entry = this.catalogue.get(name);
    if (!entry) return result(`Error: no tool named "${name}" is available`, true);

    const started = performance.now();
    const server = this.servers.get(entry.server) as ServerHandle;
    const tool = entry.tool.name;
    const finish = (content: string, isError: boolean): ToolCallResult => {
      this.options.events.emit('tool:call', {
        sessionId: scope.sessionId,
        userId: scope.userId,
        tool,
        server: server.name,
        durationMs: performance.now() - started,
        outcome: isError ? 'error' : 'ok',
      });
      return { ...result(content, isError), source: { server: server.name, tool } };
    };

    const args = parseToolArguments(toolCall.function.arguments);
    if (!args.ok) return finish(`Error: ${args.message}; call ${name} again with a JSON object that matches its input schema`, true);

    let lease: ConnectionLease;
    try {
      lease = await this.lease(server, tool, scope);
    } catch (error) {
      if (isServiceError(error) && error.code === 'TOOL_AUTH_REQUIRED') {
        finish(error.message, true);
        throw error;
      }
      if (scope.signal.aborted) return finish(`Error: the call to ${tool} was cancelled`, true);
      return finish(`Error: ${errorText(error)}`, true);
    }

    const timeoutMs = server.config.timeout_ms ?? this.options.callTimeoutMs;
    try {
      const answer = await lease.connection.callTool(tool, args.value, { timeoutMs, signal: scope.signal, meta: {
          [IDEMPOTENCY_KEY_META]: `${scope.sessionId}/${toolCall.id}`,
          // Tracing on: the call's span, as the MCP trace-context convention carries it (HTTP servers also get the header).
          ...(scope.traceparent !== undefined ? { traceparent: scope.traceparent } : {}),
        },
      });
      lease.release();
      return finish(formatToolContent(answer), answer.isError === true);
    } catch (error) {
      const failure = describeCallFailure(error, {
        server: server.name,
        tool,
        timeoutMs,
        cancelled: scope.signal.aborted,
        exitReason: lease.connection.exitReason(),
      });
      if (!failure.restart) {
        lease.release();
        return finish(`Error: ${failure.message}`, true);
      }
      lease.fail(failure.message);
      return finish(`Error: ${failure.message}; the server is being restarted`, true);
    }
  }

  /** The connection a call runs on: the shared one, or the user's own for a per-user server. */
  private async lease(server: ServerHandle, tool: string, scope: ToolCallScope): Promise<ConnectionLease> {
    if (!server.pool) {
      const connection = await server.slot.acquire(scope.signal);
      return {
        connection,
        release: () => server.slot.markAnswered(),
        fail: (reason) => server.slot.fail(connection, reason),
      };
    }
    const token = await this.accessToken(server.name, tool, scope);
    return server.pool.acquire(scope.userId, token, scope.signal);
  }

  private async accessToken(server: string, tool: string, scope: ToolCallScope): Promise<string> {
    const tokens = this.options.tokens;
    if (!tokens) {
      throw new ServiceError('TOOL_AUTH_REQUIRED', `Tool ${tool} on server ${server} needs a connected account, but this service has no account connection configured`, {
        details: { server, tool, login_url: null },
      });
    }
    let token: string | null;
    try {
      token = await tokens.getAccessToken(scope.userId, scope.signal);
    } catch (error) {
      if (isServiceError(error) && error.code === 'TOOL_AUTH_REQUIRED') throw error;
      throw new Error(`could not read your access token for server ${server}: ${errorText(error)}`, { cause: error });
    }
    if (token) return token;
    const loginUrl = tokens.loginUrl(scope.userId);
    const account = this.options.accountLabel ?? 'identity provider';
    throw new ServiceError('TOOL_AUTH_REQUIRED', `Tool ${tool} on server ${server} needs your ${account} account: connect it at ${loginUrl}`, {
      details: { server, tool, login_url: loginUrl },
    });
  }

  private rebuildCatalogue(): void {
    this.catalogue = buildCatalogue([...this.servers.values()].map(({ name, slot }) => ({ server: name, tools: slot.tools })));
    this.reportMissingApprovalNames();
  }

  /** Warns, once each, of tools a server's `require_approval` list names but the server does not offer (a typo would let them run unasked). */
  private reportMissingApprovalNames(): void {
    for (const { name, config, slot } of this.servers.values()) {
      const listed = config.require_approval;
      if (!Array.isArray(listed) || slot.tools.length === 0) continue;
      const offered = new Set(slot.tools.map((tool) => tool.name));
      for (const tool of listed) {
        const key = `${name}/${tool}`;
        if (offered.has(tool) || this.reportedMissing.has(key)) continue;
        this.reportedMissing.add(key);
        this.options.logger?.warn(`tool server ${name}: require_approval names ${tool}, which the server does not offer`, { server: name, tool });
      }
    }
  }
}
