/** Sends one progress notification: `progress` (characters of the answer so far) and `message` (the text since the last one). */
export type SendProgress = (progress: number, message: string) => Promise<void>;

/**
 * A turn's streamed text as MCP progress notifications, coalesced: at most one every
 * `intervalMs`, each carrying the text that arrived since the one before (a host shows the
 * pieces joined; resending the whole text each time would cost the square of its length), and
 * `progress` the characters streamed so far, which only grows. Notifications go out one at a
 * time, in order.
 */
export class ProgressReporter {
  private pending = '';
  private streamed = 0;
  private lastSentAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> = Promise.resolve();

  constructor(
    private readonly send: SendProgress,
    private readonly intervalMs: number,
  ) {}

  /** Adds a streamed piece: sent now if the last notification is old enough, else with the next. */
  add(piece: string): void {
    if (piece === '') return;
    this.pending += piece;
    if (this.timer) return;
    const wait = this.lastSentAt + this.intervalMs - Date.now();
    if (wait <= 0) this.emit();
    else this.timer = setTimeout(() => this.emit(), wait);
  }

  /** Sends what is still pending and waits until every notification is out (before the tool's result). */
  async flush(): Promise<void> {
    this.emit();
    await this.sending;
  }

  private emit(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending === '') return;
    const message = this.pending;
    this.pending = '';
    this.streamed += message.length;
    this.lastSentAt = Date.now();
    const progress = this.streamed;
    // A notification that cannot be sent (the client went away) does not stop the turn.
    this.sending = this.sending.then(() => this.send(progress, message)).catch(() => undefined);
  }
}
