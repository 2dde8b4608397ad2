import { isDataError } from '../ports.js';
import type { EventBus } from '../observability/event-bus.js';

/** Back-off settings of the writer. */
export type DurableWriterOptions = {
  initialDelayMs?: number;
  maxDelayMs?: number;
};

/**
 * Runs database writes so that none is dropped: a failed write is retried with exponential
 * back-off until it succeeds, and the writes of one key (a session) run in order, each one
 * after the previous one has committed.
 */
export class DurableWriter {
  private readonly tails = new Map<string, Promise<unknown>>();
  /** The writes queued and not yet committed (nor given up), by a number of their own: what each is. */
  private readonly pending = new Map<number, string>();
  private written = 0;
  private readonly initialDelayMs: number;
  private readonly maxDelayMs: number;
  private closed = false;

  constructor(private readonly events: EventBus, options: DurableWriterOptions = {}) {
    this.initialDelayMs = options.initialDelayMs ?? 100;
    this.maxDelayMs = options.maxDelayMs ?? 5000;
  }

  /** Queues `write` behind the earlier writes of `key`; resolves with its result once committed. */
  write<T>(key: string, operation: string, write: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const id = ++this.written;
    this.pending.set(id, operation);
    const result = previous.then(() => this.retry(operation, write)).finally(() => this.pending.delete(id));
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  /**
   * Resolves when every queued write has committed (or failed for good), or once `withinMs` have
   * passed, with the writes still pending then, counted by operation (empty when none is).
   */
  async flush(withinMs = Number.POSITIVE_INFINITY): Promise<Map<string, number>> {
    const deadline = Date.now() + withinMs;
    while (this.tails.size > 0) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      const all = Promise.all([...this.tails.values()]);
      if (!Number.isFinite(left)) await all;
      else {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([all, new Promise<void>((resolve) => (timer = setTimeout(resolve, left)))]);
        clearTimeout(timer);
      }
    }
    const byOperation = new Map<string, number>();
    for (const operation of this.pending.values()) byOperation.set(operation, (byOperation.get(operation) ?? 0) + 1);
    return byOperation;
  }

  /** Stops retrying: writes still failing reject. Used at shutdown after flushing. */
  close(): void {
    this.closed = true;
  }

  private async retry<T>(operation: string, write: () => Promise<T>): Promise<T> {
    let delay = this.initialDelayMs;
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await write();
      } catch (error) {
        const willRetry = !this.closed && !isDataError(error);
        this.events.emit('storage:error', { operation, error: asError(error), attempt, willRetry });
        if (!willRetry) throw error;
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, this.maxDelayMs);
      }
    }
  }
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
