import { EventEmitter } from 'node:events';
import { newHolderId } from '../sessions/process-identity.js';
import type { BackgroundResponseStore, TakenOverRun } from '../ports.js';

/** Why a background run's signal was aborted (its `reason`). */
export const RUN_CANCELLED = 'cancelled';
export const RUN_STOPPED = 'stopped';

/** The message of a response whose process stopped before it ended. */
export const ABANDONED_MESSAGE = 'the service process running this response stopped before it finished';

/** Longest pause between a run's renewals: also how soon a cancel asked on another process reaches it. */
const MAX_RENEW_MS = 500;

/** What the background runs are built from. */
export type BackgroundRunsDeps = {
  store: BackgroundResponseStore;
  /** A run not renewed this long is taken for abandoned (its process died): it is taken over, or its response fails. */
  leaseMs: number;
  /** How many times a run is taken over before its response fails instead (`sessions.max_turn_attempts`). */
  maxAttempts: number;
  /** How long a response's events are kept after it ended. */
  eventRetentionMs: number;
  onError: (error: Error) => void;
};

/** A background response running in this process. */
type LocalRun = { controller: AbortController; done: Promise<void>; startedAt: number };

/**
 * The background responses this process runs (`background: true`): each turn runs here
 * whether or not a client is connected, its run row renewed while it runs. A cancel asked on
 * any process reaches the run at its next renewal; a run whose process died is no longer
 * renewed, and the sweep that every process makes takes it over (`onTakeOver` continues its
 * turn here), or fails its response once it was taken over `maxAttempts` times. Readers of a
 * response's stored events here are woken as new ones are stored.
 */
export class BackgroundRuns {
  /** This process, as the run rows name it. */
  readonly runner = newHolderId();
  private readonly local = new Map<string, LocalRun>();
  private readonly stored = new EventEmitter().setMaxListeners(0);
  private readonly renewal: NodeJS.Timeout;
  private readonly sweeper: NodeJS.Timeout;
  private stopping = false;
  /** Continues a run taken over here; none: lapsed runs fail. */
  private resume: ((run: TakenOverRun) => void) | undefined;

  constructor(private readonly deps: BackgroundRunsDeps) {
    this.renewal = setInterval(() => void this.renew(), Math.min(MAX_RENEW_MS, Math.max(50, Math.floor(deps.leaseMs / 3))));
    this.renewal.unref();
    this.sweeper = setInterval(() => void this.sweep(), deps.leaseMs);
    this.sweeper.unref();
  }

  get leaseMs(): number {
    return this.deps.leaseMs;
  }

  /** How a run taken over here is continued (the Responses API's routes know how to run its request). */
  onTakeOver(resume: (run: TakenOverRun) => void): void {
    this.resume = resume;
  }

  /** Runs the turn of a stored background response here; `work` gets the signal that cancels it. */
  run(responseId: string, work: (signal: AbortSignal) => Promise<void>): void {
    const controller = new AbortController();
    const done = work(controller.signal)
      .catch((error: unknown) => this.deps.onError(error instanceof Error ? error : new Error(String(error))))
      .finally(() => this.local.delete(responseId));
    this.local.set(responseId, { controller, done, startedAt: performance.now() });
  }

  /**
   * Cancels a response's run: here, at once, resolving once it stored how it ended; on another
   * process, by asking it (false when no process runs it).
   */
  async cancel(responseId: string): Promise<boolean> {
    const run = this.local.get(responseId);
    if (!run) return this.deps.store.requestCancel(responseId);
    run.controller.abort(RUN_CANCELLED);
    await run.done;
    return true;
  }

  /** Tells this process's readers of a response's events that new ones were stored. */
  eventsStored(responseId: string): void {
    this.stored.emit(responseId);
  }

  /** Resolves when new events of the response were stored here, after `ms` at most, or when `signal` aborts. */
  waitForEvents(responseId: string, ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        this.stored.off(responseId, finish);
        signal.removeEventListener('abort', finish);
        resolve();
      };
      const timer = setTimeout(finish, ms);
      this.stored.once(responseId, finish);
      signal.addEventListener('abort', finish, { once: true });
    });
  }

  /**
   * Settles the runs that lapsed (their process stopped; with `everyRun`, every running one:
   * see the store): each is taken over and continued here, unless it was taken over
   * `maxAttempts` times already (or nothing here can continue it): then its response fails, and
   * its readers here are woken. Returns the ids of the failed ones.
   */
  async settleLapsed(everyRun = false): Promise<string[]> {
    const { store, maxAttempts } = this.deps;
    const resume = this.stopping ? undefined : this.resume;
    const message = resume ? `${ABANDONED_MESSAGE}, and so did the ${maxAttempts === 1 ? 'one' : maxAttempts} that took it over (sessions.max_turn_attempts)` : ABANDONED_MESSAGE;
    const failed = await store.failAbandoned(message, resume ? maxAttempts : 0, everyRun);
    for (const id of failed) this.eventsStored(id);
    if (resume) for (const run of await store.takeOver(this.runner, this.deps.leaseMs, maxAttempts, everyRun)) resume(run);
    return failed;
  }

  /** The periodic sweep: lapsed runs fail, events kept past their time are deleted. */
  private async sweep(): Promise<void> {
    try {
      await this.settleLapsed();
      await this.deps.store.pruneEvents(this.deps.eventRetentionMs);
    } catch (error) {
      this.deps.onError(error as Error);
    }
  }

  /**
   * Waits up to `waitMs` for the runs here to end; the ones still running then are stopped
   * (each stores its response as failed). No run is renewed after.
   */
  async stop(waitMs: number): Promise<void> {
    this.stopping = true;
    const runs = () => Promise.all([...this.local.values()].map((run) => run.done));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([runs(), new Promise((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
    for (const run of this.local.values()) run.controller.abort(RUN_STOPPED);
    await runs();
    clearInterval(this.renewal);
    clearInterval(this.sweeper);
  }

  /** True while the service is stopping: new background responses are refused. */
  get isStopping(): boolean {
    return this.stopping;
  }

  /** Keeps this process's runs alive; a run asked to cancel, or whose response was deleted, is cancelled. */
  private async renew(): Promise<void> {
    if (this.local.size === 0) return;
    const began = performance.now();
    try {
      const states = new Map((await this.deps.store.renew(this.runner, this.deps.leaseMs)).map((state) => [state.id, state]));
      for (const [id, run] of this.local) {
        const state = states.get(id);
        // A run that started after the renewal began may not have been seen by it.
        const gone = !state && run.startedAt < began;
        if (gone || state?.cancelRequested) run.controller.abort(RUN_CANCELLED);
      }
    } catch (error) {
      this.deps.onError(error as Error);
    }
  }
}
