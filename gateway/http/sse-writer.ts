import type { Response } from 'express';

/**
 * Writes the specification's server-sent events: `data: <json>` and a blank line per
 * event, `data: [DONE]` at the end (chat completions); or named events and a plain end (the
 * Responses API). Frames go out in the tick they are written, never held
 * longer: the frames written in one tick (the pieces of one read from the LLM server) are
 * joined and leave as one write, one chunk of the response and one system call.
 */
export class SseWriter {
  private started = false;
  /** The frames written in this tick, not sent yet ('' when none). */
  private pending = '';

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
    // Before the event loop waits for I/O again: no frame waits for a later one.
    if (this.pending === '') process.nextTick(this.flush);
    // One write per tick, not per frame: each write of a response costs a chunk header and a pass through its streams.
    this.pending += frame;
  }

  private readonly flush = (): void => {
    const frames = this.takePending();
    if (frames !== '' && !this.res.writableEnded) this.res.write(frames);
  };

  private takePending(): string {
    const frames = this.pending;
    this.pending = '';
    return frames;
  }

  done(): void {
    if (this.res.writableEnded) return;
    this.res.end(`${this.takePending()}data: [DONE]\n\n`);
  }

  /** Ends the stream without `[DONE]` (the Responses API's streams end with their last event). */
  end(): void {
    if (this.res.writableEnded) return;
    const frames = this.takePending();
    if (frames === '') this.res.end();
    else this.res.end(frames);
  }
}
