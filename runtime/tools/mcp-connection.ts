import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { McpServerConfig } from '../../config/mcp-server-schema.js';
import { abortable } from '../abortable.js';
import { mcpClientSdk, type McpClientSdk } from './mcp-client-sdk.js';
import { ProcessGroupStdioTransport } from './mcp-stdio-transport.js';
import { errorText } from './mcp-tool-results.js';

/** Where the MCP modules write what they have to say; winston's logger fits. */
export type McpLogger = {
  info(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
  error(message: string, meta?: Record<string, unknown>): void;
};

/** A tool as an MCP server lists it. */
export type McpTool = Tool;

/** What opening a connection needs. */
export type McpConnectionOptions = {
  /** The server's name in `mcp_servers`, for messages. */
  server: string;
  config: McpServerConfig;
  /** The user's access token: `MCP_USER_ACCESS_TOKEN`/`ACCESS_TOKEN` for stdio, a bearer header for http. */
  accessToken?: string;
  /** Bound on starting, initialising and (when asked) listing the tools. */
  timeoutMs: number;
  /** Aborts the opening (the service is closing). */
  signal?: AbortSignal;
  /** Whether to list the tools while opening (and follow `tools/list_changed`). */
  listTools: boolean;
  /** Called once when an open connection ends by itself (crash, exit, transport failure). */
  onLost?: (connection: McpConnection, reason: string) => void;
  /** Called with the new list when the server announces that its tools changed. */
  onToolsChanged?: (tools: McpTool[]) => void;
  /** Passed to the stdio transport: grace time before SIGTERM and before SIGKILL. */
  killGraceMs?: number;
};

const CLIENT_INFO = { name: 'svc-agent', version: '0.1.0' };

/** One live MCP client session with a tool server (a child process or an HTTP endpoint). */
export class McpConnection {
  /** The tools listed when the connection opened (empty unless `listTools`). */
  tools: McpTool[] = [];
  private isClosed = false;
  private isOpen = false;

  private constructor(
    private readonly client: Client,
    private readonly transport: Transport,
    private readonly options: McpConnectionOptions,
    private readonly sdk: McpClientSdk,
  ) {}

  /** Starts the server (stdio) or opens the session (http), initialises it and lists its tools. */
  static async open(options: McpConnectionOptions): Promise<McpConnection> {
    const sdk = await mcpClientSdk.load();
    const transport = createTransport(options, sdk);
    const client = new sdk.Client(CLIENT_INFO, {
      capabilities: {},
      ...(options.listTools && options.onToolsChanged
        ? { listChanged: { tools: { autoRefresh: false, debounceMs: 100, onChanged: () => void connection.refreshTools() } } }
        : {}),
    });
    const connection = new McpConnection(client, transport, options, sdk);
    client.onclose = () => connection.handleClose();
    // Transport hiccups (stray messages, a dropped notification stream) surface as failed calls where they matter.
    client.onerror = () => {};

    const deadline = new AbortController();
    const timer = setTimeout(
      () => deadline.abort(new Error(`did not start and answer within ${options.timeoutMs} ms`)),
      options.timeoutMs,
    );
    const signal = options.signal ? AbortSignal.any([deadline.signal, options.signal]) : deadline.signal;
    try {
      await abortable(client.connect(transport, { signal, timeout: options.timeoutMs }), signal);
      if (options.listTools) connection.tools = await abortable(connection.listAllTools(signal, options.timeoutMs), signal);
      if (signal.aborted) throw signal.reason;
      connection.isOpen = true;
      return connection;
    } catch (error) {
      await connection.close();
      throw new Error(connection.describeFailure(signal.aborted ? signal.reason : error));
    } finally {
      clearTimeout(timer);
    }
  }

  /** The server process's pid (stdio only). */
  get pid(): number | undefined {
    return this.transport instanceof ProcessGroupStdioTransport ? this.transport.pid : undefined;
  }

  /** Whether the connection has ended (closed by us or lost). */
  get closed(): boolean {
    return this.isClosed;
  }

  /**
   * Calls one tool, with `meta` as the request's `_meta`; rejects on time-out, cancellation, a
   * closed connection or a malformed result.
   */
  callTool(name: string, args: Record<string, unknown>, options: { timeoutMs: number; signal: AbortSignal; meta?: Record<string, string> }): Promise<CallToolResult> {
    const params = options.meta ? { name, arguments: args, _meta: options.meta } : { name, arguments: args };
    return this.client.callTool(params, undefined, { timeout: options.timeoutMs, signal: options.signal }) as Promise<CallToolResult>;
  }

  /** Why the server process ended, with the last lines of its stderr, when it has. */
  exitReason(): string | undefined {
    if (!(this.transport instanceof ProcessGroupStdioTransport)) return undefined;
    const how = this.transport.exitDescription;
    if (!how) return undefined;
    const tail = lastLine(this.transport.stderrTail);
    return `its process exited with ${how}${tail ? ` (stderr: ${tail})` : ''}`;
  }

  /** Closes the client; for stdio, ends the process and its whole process group. */
  async close(): Promise<void> {
    if (this.isClosed) return;
    this.isClosed = true;
    if (this.isOpen && this.transport instanceof this.sdk.StreamableHTTPClientTransport) {
      // Let the server free the session; a server that is down must not hold up the close.
      await Promise.race([this.transport.terminateSession().catch(() => {}), delay(1000)]);
    }
    await this.client.close().catch(() => {});
    await this.transport.close().catch(() => {});
  }

  private handleClose(): void {
    if (this.isClosed || !this.isOpen) return;
    this.isClosed = true;
    const reason = this.exitReason() ?? 'the connection closed';
    // Make sure nothing of the server is left behind (stdio: the rest of its process group).
    void this.transport.close().catch(() => {});
    this.options.onLost?.(this, reason);
  }

  private async refreshTools(): Promise<void> {
    if (this.isClosed) return;
    try {
      this.tools = await this.listAllTools(undefined, this.options.timeoutMs);
      this.options.onToolsChanged?.(this.tools);
    } catch {
      // keep the previous list; a broken connection is reported through onLost
    }
  }

  private async listAllTools(signal: AbortSignal | undefined, timeoutMs: number): Promise<McpTool[]> {
    if (!this.client.getServerCapabilities()?.tools) return [];
    const tools: McpTool[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.client.listTools(cursor ? { cursor } : undefined, { signal, timeout: timeoutMs });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    return tools;
  }

  private describeFailure(error: unknown): string {
    const message = errorText(error);
    const exit = this.exitReason();
    return exit ? `${message}; ${exit}` : message;
  }
}

function createTransport(options: McpConnectionOptions, sdk: McpClientSdk): Transport {
  const { config, accessToken } = options;
  if (config.transport === 'stdio') {
    const tokenEnv: Record<string, string> = accessToken === undefined ? {} : { MCP_USER_ACCESS_TOKEN: accessToken, ACCESS_TOKEN: accessToken };
    const params = { command: config.command, args: config.args, env: { ...config.env, ...tokenEnv }, cwd: config.cwd, killGraceMs: options.killGraceMs };
    return new ProcessGroupStdioTransport(params, sdk);
  }
  const headers: Record<string, string> = { ...config.headers };
  if (accessToken !== undefined) {
    for (const name of Object.keys(headers)) if (name.toLowerCase() === 'authorization') delete headers[name];
    headers.Authorization = `Bearer ${accessToken}`;
  }
  return new sdk.StreamableHTTPClientTransport(new URL(config.url), { requestInit: { headers }, fetch: fetchWithTraceparent });
}

/** The `traceparent` a tool call carries in its `_meta` (the last one in the body: `_meta` ends the call's params). */
const META_TRACEPARENT = /"traceparent":"(00-[0-9a-f]{32}-[0-9a-f]{16}-0[01])"/y;

/**
 * The HTTP transport's fetch: a request whose JSON-RPC body carries a `traceparent` in its
 * `_meta` (a tool call, tracing on) sends it as the W3C header too, so an instrumented server
 * continues the trace. The SDK takes no headers per request, and its transport serves every
 * call of the connection, so the header is read from the request it is for (the last one in
 * it: a call's arguments, which come first, may name one of their own). Without tracing this
 * costs a string search per request.
 */
function fetchWithTraceparent(url: string | URL, init?: RequestInit): Promise<Response> {
  const body = init?.body;
  const at = typeof body === 'string' ? body.lastIndexOf('"traceparent":"') : -1;
  if (at < 0) return fetch(url, init);
  META_TRACEPARENT.lastIndex = at;
  const traceparent = META_TRACEPARENT.exec(body as string)?.[1];
  if (traceparent === undefined) return fetch(url, init);
  const headers = new Headers(init?.headers);
  headers.set('traceparent', traceparent);
  return fetch(url, { ...init, headers });
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

function lastLine(text: string): string {
  const lines = text.split('\n').filter((line) => line.trim());
  return (lines.at(-1) ?? '').slice(0, 300);
}
