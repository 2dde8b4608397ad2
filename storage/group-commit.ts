import { isDataError } from '../runtime/ports.js';

/**
 * Group commit: the requests queued while the event loop runs one turn go to the database
 * together, as one statement (one round trip, one commit), and each caller waits for that
 * commit only. A statement refused for its data (SQLSTATE classes 22, 23, 42) is tried again
 * request by request, so one bad request fails alone.
 */
export class GroupCommit<Request, Result> {
  private queue: Array<{ request: Request; resolve: (result: Result) => void; reject: (error: unknown) => void }> = [];
  private scheduled = false;
  /** Keys of the requests whose commit is under way. */
  private readonly committing = new Set<string>();

  /**
   * `commit` runs the requests as one statement and returns each one's result, in order.
   * With `keyOf`, a commit holds at most one request of a key, and a request waits while an
   * earlier one of its key is being committed: the requests of one key commit one after the
   * other, in order.
   */
  constructor(
    private readonly commit: (requests: Request[]) => Promise<Result[]>,
    private readonly keyOf?: (request: Request) => string,
  ) {}

  run(request: Request): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      this.queue.push({ request, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.queue.length === 0) return;
    this.scheduled = true;
    // After the current turn of the event loop: concurrent turns that are ready together join.
    setImmediate(() => void this.flush());
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    const batch: typeof this.queue = [];
    const waiting: typeof this.queue = [];
    const keys = new Set<string>();
    for (const entry of this.queue) {
      const key = this.keyOf?.(entry.request);
      if (key === undefined) batch.push(entry);
      else if (keys.has(key) || this.committing.has(key)) waiting.push(entry);
      else {
        keys.add(key);
        batch.push(entry);
      }
    }
    this.queue = waiting;
    // Every request waits for a commit under way, which flushes again when it ends.
    if (batch.length === 0) return;
    for (const key of keys) this.committing.add(key);
    try {
      await this.commitBatch(batch);
    } finally {
      for (const key of keys) this.committing.delete(key);
      this.schedule();
    }
  }

  private async commitBatch(batch: typeof this.queue): Promise<void> {
    try {
      const results = await this.commit(batch.map((entry) => entry.request));
      batch.forEach((entry, index) => entry.resolve(results[index]!));
    } catch (error) {
      if (batch.length === 1 || !isDataError(error)) {
        for (const entry of batch) entry.reject(error);
        return;
      }
      await Promise.all(
        batch.map((entry) =>
          this.commit([entry.request]).then(
            (results) => entry.resolve(results[0]!),
            (alone: unknown) => entry.reject(alone),
          ),
        ),
      );
    }
  }
}
