import type { Response } from 'express';

/**
 * Writes the specification's server-sent events: `data: <json>` and a blank line per
 * event, `data: [DONE]` at the end. Frames go out as they are written, never buffered.
 */
export class SseWriter {
  private started = false;

  constructor(private readonly res: Response) {}

  /** True once the headers are out; errors can then only go in-stream. */
  get isStarted(): boolean {
    return this.started;
  }

  /** Sends the headers, with any the response already has (e.g. X-Session-ID). */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.res.status(200);
    this.res.set({
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
    });
    this.res.flushHeaders();
    this.res.socket?.setNoDelay(true);
  }

  data(json: string): void {
    if (!this.res.writableEnded) this.res.write(`data: ${json}\n\n`);
  }

  /** A comment line: keeps proxies from closing a quiet stream. */
  heartbeat(): void {
    if (!this.res.writableEnded) this.res.write(': keep-alive\n\n');
  }

  done(): void {
    if (this.res.writableEnded) return;
    this.res.end('data: [DONE]\n\n');
  }
}
