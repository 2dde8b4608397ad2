import type { TurnStepStore } from '../ports.js';
import type { Supervisor } from './supervisor.js';

/** What the sweep of abandoned turns is built from. */
export type AbandonedTurnsDeps = {
  supervisor: Pick<Supervisor, 'finishAbandoned'>;
  steps: TurnStepStore;
  /** How often the sweep looks for abandoned turns: the session lease (`sessions.lease_ms`). */
  leaseMs: number;
  /**
   * How long a turn must have been quiet to be taken for abandoned (`sessions.abandoned_after_ms`):
   * long after a client's own retries of it (a retry that came after the turn was finished
   * would be a turn of its own).
   */
  quietMs: number;
  /** Sessions are leased (PostgreSQL): a turn is quiet once its lease lapsed; alone (PGlite), once its newest step is old. */
  leases: boolean;
  /** How many times a turn is taken over before its message is answered with the reason (`sessions.max_turn_attempts`). */
  maxAttempts: number;
  onError: (error: Error) => void;
};

/** Most abandoned turns one sweep finishes, one after the other. */
const TURNS_PER_SWEEP = 20;

/**
 * Finishes the foreground turns whose process died before they answered and that no request
 * came to finish (see `Supervisor.finishAbandoned`): a turn that stored a step (a tool round)
 * is continued from it by another process, or by this one after a restart, and its answer is
 * stored in its session. Sweeps at the start and every `leaseMs`.
 */
export class AbandonedTurns {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;

  constructor(private readonly deps: AbandonedTurnsDeps) {}

  /** Sweeps now, then every lease. */
  start(): void {
    void this.sweep();
    this.timer = setInterval(() => void this.sweep(), this.deps.leaseMs);
    this.timer.unref();
  }

  /** Finishes the abandoned turns found now, one after the other; one sweep at a time. */
  sweep(): Promise<void> {
    this.sweeping ??= this.finishAll().finally(() => (this.sweeping = undefined));
    return this.sweeping;
  }

  private async finishAll(): Promise<void> {
    const { steps, supervisor, quietMs, leases, maxAttempts, onError } = this.deps;
    try {
      for (const { sessionId, userId } of await steps.abandoned(quietMs, leases, TURNS_PER_SWEEP)) {
        if (this.controller.signal.aborted) return;
        await supervisor.finishAbandoned(sessionId, userId, maxAttempts, this.controller.signal).catch((error: Error) => {
          // Stopping, or busy with another process's turn (it finishes the turn itself).
          if (!this.controller.signal.aborted) onError(error);
        });
      }
    } catch (error) {
      onError(error as Error);
    }
  }

  /** Stops sweeping; a turn being finished is cancelled (it is left for the next process). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.controller.abort();
    await this.sweeping;
  }
}
