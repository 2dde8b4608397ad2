import type { BackgroundResponseEnd, BackgroundResponseStore, NewResponseRecord, ResponseBodyText, StoredResponseEvent } from '../ports.js';

/**
 * Where a response's events go: a client's stream (an `SseWriter`), or the stored events of a
 * background response, which every client reads. `sequence` is the event's `sequence_number`.
 */
export type ResponseEventSink = { event(type: string, json: string, sequence: number): void; end(): void };

/** How long an event waits for the ones after it before they are stored together. */
const FLUSH_MS = 50;

/** What the event log of one background response writes to and tells. */
export type ResponseEventLogDeps = {
  store: BackgroundResponseStore;
  responseId: string;
  /** The response's body as it stands, stored with each batch of events (what `GET` shows meanwhile). */
  progress: () => ResponseBodyText | undefined;
  /** Called after each batch is stored, for readers waiting for new events. */
  onStored: () => void;
  onError: (error: Error) => void;
};

/**
 * The stored events of a background response: its first events with the response itself,
 * then its events as its turn emits them, numbered, written in batches (one statement each `FLUSH_MS` at most) with the body as it stands, so
 * that a stream broken off can be read again, from any process, after any event. A batch that
 * failed to be written is written again with the next (rewriting an event is a no-op).
 */
export class ResponseEventLog implements ResponseEventSink {
  private pending: StoredResponseEvent[] = [];
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(private readonly deps: ResponseEventLogDeps) {}

  event(type: string, data: string, sequence: number): void {
    this.pending.push({ sequence, type, data });
    this.timer ??= setTimeout(() => this.flush(), FLUSH_MS);
  }

  /** The end of the events is stored by `finish`, with the response's end. */
  end(): void {}

  /** Stores the response as it starts, with the events so far (its first ones) and its run, with the `request` (JSON text) it runs. */
  async begin(record: NewResponseRecord, runner: string, leaseMs: number, request: string): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.deps.store.start(record, this.take(), runner, leaseMs, request);
  }

  /**
   * Stores the events not stored yet now, noting that those through `through` (the last so far)
   * are stored: a step of the turn is stored next, and a process that takes the run over keeps
   * the events up to here. Rejects when they could not be stored (the step must not be either).
   */
  step(through: number): Promise<void> {
    return this.store(through);
  }

  /** Stores the response's end and the events not stored yet, after the batches under way. */
  async finish(end: BackgroundResponseEnd): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.writing;
    const events = this.take();
    await this.deps.store.finish(this.deps.responseId, end, events);
    this.deps.onStored();
  }

  private flush(): void {
    // A failed batch is told to `onError` and written again with the next.
    this.store().catch(() => undefined);
  }

  /**
   * Writes the events not stored yet, after the batches under way, with the body as it stands
   * (and `shownThrough`, when given); resolves once they are stored. A batch that failed goes
   * back in front of the pending events and is told to `onError`.
   */
  private store(shownThrough?: number): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const events = this.take();
    const { store, responseId, progress, onStored, onError } = this.deps;
    const written = this.writing.then(() => store.record(responseId, events, progress(), shownThrough));
    this.writing = written.then(onStored, (error: Error) => {
      this.pending = [...events, ...this.pending];
      onError(error);
    });
    return written;
  }

  private take(): StoredResponseEvent[] {
    const events = this.pending;
    this.pending = [];
    return events;
  }
}
