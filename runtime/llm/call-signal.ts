/**
 * The signal of one LLM call: aborted by the caller's signal or after `timeoutMs`. One
 * controller and one timer, both let go when the call is done (`AbortSignal.any` and
 * `AbortSignal.timeout` cost several times as much a call, and keep their signals for the
 * garbage collector to trace).
 */
export class CallSignal {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private readonly onCallerAbort: (() => void) | undefined;
  timedOut = false;

  constructor(
    private readonly caller: AbortSignal | undefined,
    timeoutMs: number,
  ) {
    this.timer = setTimeout(() => {
      this.timedOut = true;
      this.controller.abort(new DOMException('The LLM call timed out', 'TimeoutError'));
    }, timeoutMs);
    if (caller?.aborted) this.controller.abort(caller.reason);
    else if (caller) {
      this.onCallerAbort = () => this.controller.abort(caller.reason);
      caller.addEventListener('abort', this.onCallerAbort, { once: true });
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Waits for `work`, or throws the abort's reason as soon as the call is aborted. */
  async race<T>(work: Promise<T>): Promise<T> {
    const signal = this.controller.signal;
    if (signal.aborted) throw signal.reason;
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      return await Promise.race([work, aborted]);
    } finally {
      signal.removeEventListener('abort', onAbort!);
    }
  }

  done(): void {
    clearTimeout(this.timer);
    if (this.onCallerAbort) this.caller?.removeEventListener('abort', this.onCallerAbort);
  }
}
