import type { McpServerConfig } from '../../config/mcp-server-schema.js';
import { abortable } from '../abortable.js';
import { McpConnection, type McpLogger, type McpTool } from './mcp-connection.js';
import { errorText } from './mcp-tool-results.js';

/** Exponential back-off of reconnection attempts. */
export type RetryPolicy = { initialMs: number; maxMs: number };

/** What a slot needs besides its server. */
export type ServerSlotOptions = {
  connectTimeoutMs: number;
  retry: RetryPolicy;
  /** False for per-user servers: the slot only probes the tool list and closes the connection. */
  keepConnection: boolean;
  logger?: McpLogger;
  killGraceMs?: number;
  /** Called whenever the slot's tool list changes. */
  onToolsChanged: () => void;
};

/** A connection that has been up this long counts as healthy even without a successful call. */
const STABLE_AFTER_MS = 60_000;

/**
 * One configured server's connection and its health: connects, lists tools, and after a
 * failure reconnects in the background with exponential back-off. For a per-user server it
 * holds only the tool list, from a probe connection made without a user token.
 */
export class ServerSlot {
  status: 'connecting' | 'connected' | 'failed' = 'connecting';
  /** The last known tool list (kept while the server is down, so the offered tools stay stable). */
  tools: McpTool[] = [];
  error: string | undefined;
  attempts = 0;
  lastAttempt: Date | undefined;

  private connection: McpConnection | undefined;
  private connecting: Promise<void> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private failures = 0;
  private connectedAt = 0;
  private hasAnswered = false;
  private readonly closing = new AbortController();

  constructor(
    readonly name: string,
    readonly config: McpServerConfig,
    private readonly options: ServerSlotOptions,
  ) {}

  /** Attempts a connection now (or joins the one in progress); never rejects. */
  connect(): Promise<void> {
    if (this.closing.signal.aborted) return Promise.resolve();
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.connecting ??= this.attempt().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  /** The live connection, waiting for one being made; rejects when the server is unavailable. */
  async acquire(signal: AbortSignal): Promise<McpConnection> {
    if (!this.connection && this.connecting) await abortable(this.connecting, signal);
    if (this.connection) return this.connection;
    throw new Error(`server ${this.name} is unavailable (${this.error ?? 'not connected'}); it is retried in the background`);
  }

  /** Records that the server answered a call, which resets the back-off. */
  markAnswered(): void {
    this.hasAnswered = true;
    this.failures = 0;
  }

  /** Drops a broken connection (crash, time-out, malformed answer) and reconnects in the background. */
  fail(connection: McpConnection, reason: string): void {
    if (connection !== this.connection || this.closing.signal.aborted) return;
    this.connection = undefined;
    void connection.close();
    const wasHealthy = this.hasAnswered || Date.now() - this.connectedAt >= STABLE_AFTER_MS;
    this.failures = wasHealthy ? 0 : this.failures + 1;
    this.status = 'failed';
    this.error = reason;
    const delayMs = this.failures === 0 ? 0 : this.backoff();
    this.options.logger?.warn(`tool server ${this.name} failed: ${reason}; reconnecting in ${delayMs} ms`, { server: this.name });
    this.schedule(delayMs);
  }

  /** Stops retrying and closes the connection (for stdio: the process and its group). */
  async close(): Promise<void> {
    this.closing.abort(new Error('the tool registry is closing'));
    clearTimeout(this.retryTimer);
    const connection = this.connection;
    this.connection = undefined;
    await Promise.all([connection?.close(), this.connecting]);
  }

  private async attempt(): Promise<void> {
    this.status = 'connecting';
    this.attempts += 1;
    this.lastAttempt = new Date();
    try {
      const connection = await McpConnection.open({
        server: this.name,
        config: this.config,
        timeoutMs: this.options.connectTimeoutMs,
        signal: this.closing.signal,
        listTools: true,
        killGraceMs: this.options.killGraceMs,
        onLost: (lost, reason) => this.fail(lost, reason),
        onToolsChanged: (tools) => this.setTools(tools),
      });
      if (this.closing.signal.aborted) {
        await connection.close();
        return;
      }
      this.setTools(connection.tools);
      this.error = undefined;
      if (this.options.keepConnection) {
        this.connection = connection;
        this.connectedAt = Date.now();
        this.hasAnswered = false;
        this.status = 'connected';
      } else {
        await connection.close();
        this.failures = 0;
        this.status = 'connected';
      }
      // How many of its tools are offered is the registry's to say (the line once every server is up, and /health).
      this.options.logger?.info(`tool server ${this.name} ready`, { server: this.name });
    } catch (error) {
      if (this.closing.signal.aborted) return;
      this.failures += 1;
      this.status = 'failed';
      this.error = errorText(error);
      const delayMs = this.backoff();
      this.options.logger?.warn(`tool server ${this.name} could not be reached: ${this.error}; retrying in ${delayMs} ms`, {
        server: this.name,
        attempt: this.attempts,
      });
      this.schedule(delayMs);
    }
  }

  private setTools(tools: McpTool[]): void {
    this.tools = tools;
    this.options.onToolsChanged();
  }

  private backoff(): number {
    const { initialMs, maxMs } = this.options.retry;
    return Math.min(maxMs, initialMs * 2 ** Math.max(0, this.failures - 1));
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => void this.connect(), delayMs);
    this.retryTimer.unref();
  }
}
