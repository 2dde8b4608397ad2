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

  /** `commit` runs the requests as one statement and returns each one's result, in order. */
  constructor(private readonly commit: (requests: Request[]) => Promise<Result[]>) {}

  run(request: Request): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      this.queue.push({ request, resolve, reject });
      if (this.scheduled) return;
      this.scheduled = true;
      // After the current turn of the event loop: concurrent turns that are ready together join.
      setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    const batch = this.queue;
    this.queue = [];
    this.scheduled = false;
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
