import type { DurableWriter } from './durable-writer.js';
import type { SessionLeaseStore } from '../ports.js';
import { ServiceError } from '../service-error.js';
import { newHolderId } from './process-identity.js';

/** How a lease was had: `generation` of the acquisition, and whether this process held it already. */
export type HeldLease = { generation: number; reused: boolean };

/** The leases' settings. */
export type SessionLeaseSettings = {
  /** A lease not renewed this long is free again (its process died). */
  leaseMs: number;
  /** First wait between attempts on a busy session; doubled up to `maxPollMs`. */
  pollMs?: number;
  maxPollMs?: number;
};

/** What the leases are built from. */
export type SessionLeaseDeps = {
  store: SessionLeaseStore;
  /** A lease is given back only after the session's queued writes have committed. */
  writer: DurableWriter;
  settings: SessionLeaseSettings;
  /** Called when a renewal finds that another process took a lease this one held. */
  onLost?: (sessionId: string) => void;
  /** Called when renewing failed (the database is down). */
  onRenewError?: (error: Error) => void;
};

/** Giving a lease back: `attempt` settles with each try's result; `cancelled` makes the next try a no-op. */
type Giving = { attempt: Promise<boolean>; cancelled: boolean };

/** A lease this process holds: its turns using it, and the giving back once it is under way. */
type Holding = { generation: number; users: number; giving?: Giving };

/**
 * One turn at a time per session across processes and instances sharing a PostgreSQL
 * database: a process runs a session's turn only while it holds the session's lease row.
 * Leases are renewed in one statement for all held sessions every third of `leaseMs`, so a
 * crashed process's sessions are free again after at most `leaseMs`. No connection is held
 * between statements. A lease is given back through the session's write queue, after the
 * turn's writes have committed, so the next holder reads every row of the turn before.
 */
export class SessionLeases {
  /** This process, as the lease rows name it. */
  readonly holder = newHolderId();
  private readonly held = new Map<string, Holding>();
  private readonly heartbeat: NodeJS.Timeout;
  private renewing: Promise<void> | undefined;

  constructor(private readonly deps: SessionLeaseDeps) {
    this.heartbeat = setInterval(() => void this.renew(), Math.max(50, Math.floor(deps.settings.leaseMs / 3)));
    this.heartbeat.unref();
  }

  /** Sessions whose lease this process holds. */
  get heldCount(): number {
    return this.held.size;
  }

  /**
   * Takes the session's lease, waiting while another process holds it, for at most `waitMs`
   * (then SESSION_BUSY). `reused` is true when this process held it already, so nobody else
   * can have run a turn since. A database failure is a DATABASE_UNAVAILABLE error.
   */
  async acquire(sessionId: string, waitMs: number, signal?: AbortSignal): Promise<HeldLease> {
    const deadline = Date.now() + waitMs;
    const reused = await this.reuse(sessionId, deadline);
    if (reused) return reused;
    let pause = this.deps.settings.pollMs ?? 5;
    for (;;) {
      const grant = await this.tryAcquire(sessionId);
      // While this call waited on the database, a turn of this process may have taken it.
      const meanwhile = await this.reuse(sessionId, deadline);
      if (meanwhile) return meanwhile;
      if (grant) {
        this.held.set(sessionId, { generation: grant.generation, users: 1 });
        return { generation: grant.generation, reused: false };
      }
      if (signal?.aborted) throw new ServiceError('INVALID_REQUEST', 'the request was cancelled while waiting for its session');
      if (Date.now() + pause > deadline) throw busy(sessionId);
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(pause * 2, this.deps.settings.maxPollMs ?? 50);
    }
  }

  /**
   * The lease this process holds already, for one more turn. While it is being given back
   * the database may free it any moment, so this waits for that try: once a try has failed
   * (the database is down) the giving back is called off and the lease kept.
   */
  private async reuse(sessionId: string, deadline: number): Promise<HeldLease | undefined> {
    for (;;) {
      const holding = this.held.get(sessionId);
      if (!holding) return undefined;
      const giving = holding.giving;
      if (!giving) {
        holding.users += 1;
        return { generation: holding.generation, reused: true };
      }
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw busy(sessionId);
      let timer: NodeJS.Timeout | undefined;
      const given = await Promise.race([
        giving.attempt,
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), remaining);
        }),
      ]).finally(() => clearTimeout(timer));
      if (!given && holding.giving === giving && this.held.get(sessionId) === holding) {
        giving.cancelled = true;
        holding.giving = undefined;
      }
    }
  }

  /** Gives the lease back once the session's queued writes have committed (unless taken again meanwhile). */
  release(sessionId: string): void {
    const holding = this.held.get(sessionId);
    if (!holding) return;
    holding.users -= 1;
    if (holding.users > 0) return;
    let giving: Giving | undefined;
    void this.deps.writer
      .write(sessionId, 'release the session lease', async () => {
        if (giving?.cancelled || this.held.get(sessionId) !== holding || holding.users > 0) return;
        let settle!: (given: boolean) => void;
        giving ??= { attempt: Promise.resolve(false), cancelled: false };
        giving.attempt = new Promise<boolean>((resolve) => {
          settle = resolve;
        });
        holding.giving = giving;
        try {
          await this.deps.store.release(sessionId, this.holder, holding.generation);
        } catch (error) {
          settle(false);
          throw error;
        }
        this.forget(sessionId, holding);
        settle(true);
      })
      // The writer gave up (shutdown): the lease expires on its own.
      .catch(() => this.forget(sessionId, holding));
  }

  /** Forgets a lease that a fenced write found taken by another process: the next turn here acquires it anew. */
  lost(sessionId: string): void {
    this.held.delete(sessionId);
  }

  private forget(sessionId: string, holding: Holding): void {
    if (this.held.get(sessionId) === holding) this.held.delete(sessionId);
  }

  /** Stops renewing. Leases still held expire after `leaseMs`; release them first to free them at once. */
  close(): void {
    clearInterval(this.heartbeat);
  }

  private async tryAcquire(sessionId: string) {
    try {
      return await this.deps.store.tryAcquire(sessionId, this.holder, this.deps.settings.leaseMs);
    } catch (error) {
      throw new ServiceError('DATABASE_UNAVAILABLE', 'the database is unavailable; try again shortly', {
        cause: error,
        headers: { 'Retry-After': '1' },
      });
    }
  }

  private renew(): Promise<void> {
    if (this.renewing || this.held.size === 0) return this.renewing ?? Promise.resolve();
    const renewed = new Map(this.held);
    this.renewing = this.deps.store
      .renew(this.holder, [...renewed.keys()], this.deps.settings.leaseMs)
      .then(
        (kept) => {
          const still = new Set(kept);
          for (const [sessionId, holding] of renewed) {
            // Released and taken again while renewing: that newer lease is not in question.
            // Being given back: the renewal may have read the row the release just freed.
            if (still.has(sessionId) || this.held.get(sessionId) !== holding || holding.giving) continue;
            this.held.delete(sessionId);
            this.deps.onLost?.(sessionId);
          }
        },
        (error: Error) => this.deps.onRenewError?.(error),
      )
      .finally(() => {
        this.renewing = undefined;
      });
    return this.renewing;
  }
}

function busy(sessionId: string): ServiceError {
  return new ServiceError('SESSION_BUSY', `session ${sessionId} is busy with a turn in another process; try again`, {
    headers: { 'Retry-After': '1' },
  });
}
