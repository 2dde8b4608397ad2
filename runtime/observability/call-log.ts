import type { CallRecord, CallStore, NewCallRecord } from '../ports.js';

/** How many calls the log keeps in memory: per session, and in all. */
export type CallLogSettings = { perSession: number; total: number };

/**
 * The LLM and tool calls of sessions, for `/v1/agents/{id}/calls` and the inspector. This
 * process keeps the recent ones in memory, bounded per session and in all (the oldest go
 * first). With a store (`inspect.store_calls`), every call is also written to the database,
 * which then answers: it holds every call, from every process.
 */
export class CallLog {
  private readonly bySession = new Map<string, CallRecord[]>();
  /** Every call remembered, oldest first, from `head` on; a call its session already dropped is skipped. */
  private readonly queue: CallRecord[] = [];
  private head = 0;
  private held = 0;
  private nextId = 1;

  constructor(
    private readonly settings: CallLogSettings,
    private readonly store?: CallStore,
  ) {}

  /** Whether calls are written to the database. */
  get stores(): boolean {
    return this.store !== undefined;
  }

  /** Calls held in memory. */
  get size(): number {
    return this.held;
  }

  /** Keeps a call in memory; returns it with its id. */
  remember(call: NewCallRecord): CallRecord {
    const record = { ...call, id: this.nextId++ } as CallRecord;
    let calls = this.bySession.get(call.sessionId);
    if (!calls) this.bySession.set(call.sessionId, (calls = []));
    calls.push(record);
    this.queue.push(record);
    this.held += 1;
    if (calls.length > this.settings.perSession) this.dropFirst(calls);
    while (this.held > this.settings.total) this.dropOldest();
    // Calls their sessions dropped stay queued until reached: the queue is rebuilt before they pile up.
    if (this.queue.length - this.head > 2 * this.settings.total + 1024) this.compact();
    return record;
  }

  /** Writes calls to the store (with none, nothing). */
  async persist(calls: NewCallRecord[]): Promise<void> {
    await this.store?.append(calls);
  }

  /** A page of a session's calls, oldest first, with ids greater than `afterId`. */
  async page(sessionId: string, options: { afterId?: number; limit: number }): Promise<CallRecord[]> {
    if (this.store) return this.store.page(sessionId, options);
    const calls = this.bySession.get(sessionId) ?? [];
    const after = options.afterId ?? 0;
    return calls.filter((call) => call.id > after).slice(0, options.limit);
  }

  /** Forgets a session's calls, in memory and in the store. */
  async forget(sessionId: string): Promise<void> {
    this.held -= this.bySession.get(sessionId)?.length ?? 0;
    this.bySession.delete(sessionId);
    await this.store?.deleteSession(sessionId);
  }

  /** Drops a session's oldest call. */
  private dropFirst(calls: CallRecord[]): void {
    const dropped = calls.shift();
    if (!dropped) return;
    this.held -= 1;
    if (calls.length === 0) this.bySession.delete(dropped.sessionId);
  }

  /** Leaves only the calls still held in the queue, in order. */
  private compact(): void {
    const held = this.queue.slice(this.head).filter((call) => this.isHeld(call));
    this.queue.length = 0;
    this.queue.push(...held);
    this.head = 0;
  }

  /** Each session's calls are in the order remembered, so a call is held when its session's first is not newer. */
  private isHeld(call: CallRecord): boolean {
    const first = this.bySession.get(call.sessionId)?.[0];
    return first !== undefined && first.id <= call.id;
  }

  /** Drops the oldest call still held, whichever session it belongs to. */
  private dropOldest(): void {
    while (this.head < this.queue.length) {
      const oldest = this.queue[this.head++]!;
      if (this.isHeld(oldest)) {
        this.dropFirst(this.bySession.get(oldest.sessionId)!);
        break;
      }
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
  }
}
