import type { McpServerConfig } from '../../config/mcp-server-schema.js';
import { abortable } from '../abortable.js';
import { McpConnection, type McpLogger } from './mcp-connection.js';

/** A connection lent to one call; hand it back with `release` or report it broken with `fail`. */
export type ConnectionLease = {
  connection: McpConnection;
  release(): void;
  fail(reason: string): void;
};

type Entry = {
  userId: string;
  token: string;
  opening: Promise<McpConnection>;
  connection: McpConnection | undefined;
  inFlight: number;
  idleTimer: NodeJS.Timeout | undefined;
  /** No longer handed out (token changed, idle, broken); closed once its calls have finished. */
  isRetired: boolean;
};

/** What a pool needs besides its server. */
export type UserConnectionPoolOptions = {
  server: string;
  config: McpServerConfig;
  connectTimeoutMs: number;
  idleMs: number;
  logger?: McpLogger;
  killGraceMs?: number;
};

/**
 * The connections of a per-user server, one per user, opened with that user's token
 * (stdio: a process with `MCP_USER_ACCESS_TOKEN`; http: a bearer header). A connection is
 * replaced when the user's token changes and closed after `idleMs` without calls.
 */
export class UserConnectionPool {
  private readonly entries = new Map<string, Entry>();
  private readonly retired = new Set<Entry>();
  private isClosed = false;

  constructor(private readonly options: UserConnectionPoolOptions) {}

  /** How many users have a connection (open or opening). */
  get size(): number {
    return this.entries.size;
  }

  /** The connection of `userId` for `token`, opening (or replacing) it as needed. */
  async acquire(userId: string, token: string, signal: AbortSignal): Promise<ConnectionLease> {
    if (this.isClosed) throw new Error(`server ${this.options.server} is closed`);
    let entry = this.entries.get(userId);
    if (entry && entry.token !== token) {
      this.retire(entry);
      entry = undefined;
    }
    entry ??= this.open(userId, token);
    entry.inFlight += 1;
    clearTimeout(entry.idleTimer);
    const current = entry;
    let connection: McpConnection;
    try {
      connection = await abortable(current.opening, signal);
    } catch (error) {
      this.release(current);
      throw error;
    }
    let isSettled = false;
    return {
      connection,
      release: () => {
        if (isSettled) return;
        isSettled = true;
        this.release(current);
      },
      fail: (reason) => {
        if (isSettled) return;
        isSettled = true;
        this.options.logger?.warn(`per-user tool server ${this.options.server} failed for a user: ${reason}`, { server: this.options.server });
        // A broken process is ended at once; the user's next call starts a fresh one.
        this.retire(current);
        void current.connection?.close();
        this.release(current);
      },
    };
  }

  /** Closes every connection, including those in use. */
  async close(): Promise<void> {
    this.isClosed = true;
    const all = [...this.entries.values(), ...this.retired];
    this.entries.clear();
    this.retired.clear();
    await Promise.all(
      all.map(async (entry) => {
        clearTimeout(entry.idleTimer);
        entry.isRetired = true;
        const connection = await entry.opening.catch(() => undefined);
        await connection?.close();
      }),
    );
  }

  private open(userId: string, token: string): Entry {
    const entry: Entry = { userId, token, opening: undefined as never, connection: undefined, inFlight: 0, idleTimer: undefined, isRetired: false };
    entry.opening = McpConnection.open({
      server: this.options.server,
      config: this.options.config,
      accessToken: token,
      timeoutMs: this.options.connectTimeoutMs,
      listTools: false,
      killGraceMs: this.options.killGraceMs,
      onLost: () => this.retire(entry),
    }).then(
      (connection) => {
        entry.connection = connection;
        if (this.isClosed || (entry.isRetired && entry.inFlight === 0)) void connection.close();
        return connection;
      },
      (error: unknown) => {
        this.retire(entry);
        throw error;
      },
    );
    // Callers see the rejection through acquire(); this keeps it from being reported as unhandled.
    entry.opening.catch(() => {});
    this.entries.set(userId, entry);
    return entry;
  }

  private release(entry: Entry): void {
    entry.inFlight -= 1;
    if (entry.inFlight > 0) return;
    if (entry.isRetired) {
      this.retired.delete(entry);
      void entry.connection?.close();
      return;
    }
    clearTimeout(entry.idleTimer);
    entry.idleTimer = setTimeout(() => {
      if (entry.inFlight > 0 || entry.isRetired) return;
      this.options.logger?.info(`stopping idle per-user tool server ${this.options.server}`, { server: this.options.server });
      this.retire(entry);
    }, this.options.idleMs);
    entry.idleTimer.unref();
  }

  /** Stops handing the entry out; closes it now if no call uses it, else when the last one ends. */
  private retire(entry: Entry): void {
    if (this.entries.get(entry.userId) === entry) this.entries.delete(entry.userId);
    if (entry.isRetired) return;
    entry.isRetired = true;
    clearTimeout(entry.idleTimer);
    if (entry.inFlight === 0) {
      void entry.connection?.close();
    } else {
      this.retired.add(entry);
    }
  }
}
