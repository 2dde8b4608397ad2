import type { Response } from 'express';

/**
 * Writes the specification's server-sent events: `data: <json>` and a blank line per
 * event, `data: [DONE]` at the end (chat completions); or named events and a plain end (the
 * Responses API). Frames go out in the tick they are written, never held
 * longer: the frames written in one tick (the pieces of one read from the LLM server) leave
 * in one system call.
 */
export class SseWriter {
  private started = false;
  private corked = false;

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
    this.write(`data: ${json}\n\n`);
  }

  /** A named event: `event: <type>`, then its data. */
  event(type: string, json: string): void {
    this.write(`event: ${type}\ndata: ${json}\n\n`);
  }

  /** A comment line: keeps proxies from closing a quiet stream. */
  heartbeat(): void {
    this.write(': keep-alive\n\n');
  }

  private write(frame: string): void {
    if (this.res.writableEnded) return;
    if (!this.corked) {
      this.corked = true;
      this.res.cork();
      // Before the event loop waits for I/O again: no frame waits for a later one.
      process.nextTick(() => {
        this.corked = false;
        this.res.uncork();
      });
    }
    this.res.write(frame);
  }

  done(): void {
    if (this.res.writableEnded) return;
    this.res.end('data: [DONE]\n\n');
  }

  /** Ends the stream without `[DONE]` (the Responses API's streams end with their last event). */
  end(): void {
    if (this.res.writableEnded) return;
    this.res.end();
  }
}
