import type { DurableWriter } from './durable-writer.js';
import { FIRST_LEASE_GENERATION, type SessionLeaseStore } from '../ports.js';
import { databaseUnavailable, ServiceError } from '../service-error.js';
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
  /** Called when another process asks for a session whose lease this one holds: drop it and give the lease back. */
  onHandoverAsked?: (sessionId: string) => void;
  /** Called when renewing failed (the database is down), or listening for handover requests did. */
  onRenewError?: (error: Error) => void;
};

/** Giving a lease back: `attempt` settles with each try's result (`next` starts the next try's); `cancelled` makes the next try a no-op. */
type Giving = { attempt: Promise<boolean>; settle: (given: boolean) => void; next: () => void; cancelled: boolean };

function newGiving(): Giving {
  const giving: Giving = {
    attempt: Promise.resolve(false),
    settle: () => {},
    cancelled: false,
    next: () => {
      giving.attempt = new Promise<boolean>((resolve) => (giving.settle = resolve));
    },
  };
  giving.next();
  return giving;
}

/**
 * A lease this process holds: its turns using it, when the database last confirmed it, whether
 * it is to be given back once no turn uses it, and the giving back once it is under way.
 */
type Holding = { generation: number; users: number; confirmedAt: number; giveBack: boolean; giving?: Giving };

/**
 * One turn at a time per session across processes and instances sharing a PostgreSQL
 * database: a process runs a session's turns only while it holds the session's lease row.
 *
 * A lease is kept while the session's actor is cached here, so a turn of a cached session
 * touches no lease row. Leases are renewed in one statement for all held sessions every third
 * of `leaseMs`, so a crashed process's sessions are free again after at most `leaseMs`. A lease
 * is given back when the actor is evicted, at shutdown, and when another process asks for the
 * session: that process marks the lease wanted and notifies (`askHandover`); the holder gives it
 * back as soon as its turn on it ends (the next renewal catches a lost notification). No
 * connection is held between statements. A lease is given back through the session's write
 * queue, after the turns' writes have committed, so the next holder reads every row of them.
 */
export class SessionLeases {
  /** This process, as the lease rows name it. */
  readonly holder = newHolderId();
  private readonly held = new Map<string, Holding>();
  private readonly heartbeat: NodeJS.Timeout;
  private renewing: Promise<void> | undefined;
  private stopListening: Promise<(() => Promise<void>) | undefined>;

  constructor(private readonly deps: SessionLeaseDeps) {
    this.heartbeat = setInterval(() => void this.renew(), Math.max(50, Math.floor(deps.settings.leaseMs / 3)));
    this.heartbeat.unref();
    this.stopListening = deps.store
      .onHandoverAsked(this.holder, (sessionId) => this.handoverAsked(sessionId))
      .catch((error: Error) => {
        // Without notifications, renewals still report wanted leases, a third of a lease later.
        this.deps.onRenewError?.(error);
        return undefined;
      });
  }

  /** Resolves once handover requests are listened for (or listening failed and renewals stand in). */
  async ready(): Promise<void> {
    await this.stopListening;
  }

  /** Sessions whose lease this process holds. */
  get heldCount(): number {
    return this.held.size;
  }

  /**
   * Takes the session's lease, waiting while another process holds it, for at most `waitMs`
   * (then SESSION_BUSY); the holder is asked to hand it over. `reused` is true when this
   * process held it already, so nobody else can have run a turn since. A database failure is
   * a DATABASE_UNAVAILABLE error.
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
        this.held.set(sessionId, { generation: grant.generation, users: 1, confirmedAt: Date.now(), giveBack: false });
        return { generation: grant.generation, reused: false };
      }
      // Asked again after every miss: the holder may have given it back and taken it again meanwhile.
      await this.deps.store.askHandover(sessionId, this.holder).catch(() => undefined);
      if (signal?.aborted) throw new ServiceError('INVALID_REQUEST', 'the request was cancelled while waiting for its session');
      if (Date.now() + pause > deadline) throw busy(sessionId);
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(pause * 2, this.deps.settings.maxPollMs ?? 50);
    }
  }

  /**
   * The lease this process holds already, for one more turn. A lease the database has not
   * confirmed for two thirds of `leaseMs` (renewals failed) may be lapsing: it is taken
   * again instead, which also tells whether another process came between. While it is being
   * given back the database may free it any moment, so this waits for that try: once a try
   * has failed (the database is down) the giving back is called off and the lease kept.
   */
  private async reuse(sessionId: string, deadline: number): Promise<HeldLease | undefined> {
    for (;;) {
      const holding = this.held.get(sessionId);
      if (!holding) return undefined;
      const giving = holding.giving;
      if (!giving) {
        if (Date.now() - holding.confirmedAt > (2 * this.deps.settings.leaseMs) / 3) {
          if (holding.users === 0) this.held.delete(sessionId);
          else return await this.reconfirm(sessionId, holding);
          return undefined;
        }
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
        holding.giveBack = false;
      }
    }
  }

  /** Takes a held lease that may be lapsing again while a turn of this process still uses it. */
  private async reconfirm(sessionId: string, holding: Holding): Promise<HeldLease | undefined> {
    const grant = await this.tryAcquire(sessionId);
    if (!grant) return undefined;
    holding.generation = grant.generation;
    holding.confirmedAt = Date.now();
    holding.users += 1;
    return { generation: grant.generation, reused: false };
  }

  /** The lease a new session's first write takes with its row, for this process (see `SessionStore.start`). */
  get firstLease(): { holder: string; ttlMs: number } {
    return { holder: this.holder, ttlMs: this.deps.settings.leaseMs };
  }

  /**
   * Holds, for the turn that wrote it, the lease a new session's first write took
   * (`firstLease`, at `FIRST_LEASE_GENERATION`) once it committed; `sentAt` is when that write
   * was sent: the lease runs from the database's clock at its commit, later than that.
   */
  adopt(sessionId: string, sentAt: number): void {
    this.held.set(sessionId, { generation: FIRST_LEASE_GENERATION, users: 1, confirmedAt: sentAt, giveBack: false });
  }

  /** Ends a turn's use of the lease. The lease stays held, unless it is to be given back. */
  release(sessionId: string): void {
    const holding = this.held.get(sessionId);
    if (!holding) return;
    holding.users = Math.max(0, holding.users - 1);
    if (holding.users === 0 && holding.giveBack) this.startGivingBack(sessionId, holding);
  }

  /** Gives the lease back once no turn uses it and the session's queued writes have committed. */
  giveBack(sessionId: string): void {
    const holding = this.held.get(sessionId);
    if (!holding) return;
    holding.giveBack = true;
    if (holding.users === 0) this.startGivingBack(sessionId, holding);
  }

  private startGivingBack(sessionId: string, holding: Holding): void {
    if (holding.giving) return;
    const giving = newGiving();
    holding.giving = giving;
    void this.deps.writer
      .write(sessionId, 'release the session lease', async () => {
        if (giving.cancelled || this.held.get(sessionId) !== holding || holding.users > 0) {
          if (holding.giving === giving) holding.giving = undefined;
          giving.settle(false);
          return;
        }
        try {
          await this.deps.store.release(sessionId, this.holder, holding.generation);
        } catch (error) {
          // A turn waiting for the lease may call the giving back off now and keep it.
          giving.settle(false);
          giving.next();
          throw error;
        }
        this.forget(sessionId, holding);
        giving.settle(true);
      })
      // The writer gave up (shutdown): the lease expires on its own.
      .catch(() => {
        this.forget(sessionId, holding);
        giving.settle(false);
      });
  }

  /** Forgets a lease that a fenced write found taken by another process: the next turn here acquires it anew. */
  lost(sessionId: string): void {
    this.held.delete(sessionId);
  }

  private forget(sessionId: string, holding: Holding): void {
    if (this.held.get(sessionId) === holding) this.held.delete(sessionId);
  }

  private handoverAsked(sessionId: string): void {
    const holding = this.held.get(sessionId);
    if (!holding || holding.giveBack) return;
    this.deps.onHandoverAsked?.(sessionId);
    // Whoever handles the request may only drop its actor: the lease goes back all the same.
    this.giveBack(sessionId);
  }

  /** Stops renewing and listening. Leases still held expire after `leaseMs`; give them back first to free them at once. */
  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    const stop = await this.stopListening;
    await stop?.().catch(() => undefined);
  }

  private async tryAcquire(sessionId: string) {
    try {
      return await this.deps.store.tryAcquire(sessionId, this.holder, this.deps.settings.leaseMs);
    } catch (error) {
      throw databaseUnavailable(error);
    }
  }

  private renew(): Promise<void> {
    if (this.renewing || this.held.size === 0) return this.renewing ?? Promise.resolve();
    const renewed = new Map(this.held);
    const started = Date.now();
    this.renewing = this.deps.store
      .renew(this.holder, [...renewed.keys()], this.deps.settings.leaseMs)
      .then(
        ({ kept, wanted }) => {
          const still = new Set(kept);
          for (const [sessionId, holding] of renewed) {
            // Released and taken again while renewing: that newer lease is not in question.
            // Being given back: the renewal may have read the row the release just freed.
            if (this.held.get(sessionId) !== holding || holding.giving) continue;
            if (still.has(sessionId)) {
              holding.confirmedAt = Math.max(holding.confirmedAt, started);
              continue;
            }
            this.held.delete(sessionId);
            this.deps.onLost?.(sessionId);
          }
          for (const sessionId of wanted) this.handoverAsked(sessionId);
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
