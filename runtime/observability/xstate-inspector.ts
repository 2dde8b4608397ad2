import type { StatelyInspectionEvent } from '@statelyai/inspect';
import { WebSocket } from 'undici';
import type { InspectionEvent } from 'xstate';
import { ConfigError } from '../../config/load-config.js';
import { lazyModule } from '../lazy-module.js';

/** `@statelyai/inspect`, loaded only by a service that sends its actors to an inspector. */
const statelyInspect = lazyModule(() => import('@statelyai/inspect'));

/** What the XState inspector is built from. */
export type XStateInspectorOptions = {
  /** The inspector's WebSocket URL (`inspect.websocket_url`), ws:// or wss://. */
  url: string;
  /** Connect at once (default); otherwise on `start()`. */
  autoStart?: boolean;
  /** Told about an event that could not be sent; the session goes on regardless. */
  onError?: (error: Error) => void;
};

/** Sends every session actor's inspection events to an XState inspector over a WebSocket. */
export type XStateInspector = {
  /** The observer the supervisor hands to every actor; it never throws and never waits. */
  inspect: (event: InspectionEvent) => void;
  /** Connects (and reconnects while the inspector is away). */
  start(): void;
  /** Disconnects for good: no reconnection is attempted after it. */
  stop(): void;
};

/** Events held while the inspector is away; the oldest go first (the library's own default). */
const MAX_QUEUED_EVENTS = 200;
const FIRST_RETRY_MS = 1_000;
const MAX_RETRY_MS = 30_000;

/**
 * The XState inspector of `@statelyai/inspect` (the Stately wire format: `@xstate.actor`,
 * `@xstate.event`, `@xstate.snapshot`) on a socket of our own. The library's
 * `createWebSocketInspector` cannot be stopped while its URL is unreachable: it retries every
 * 5 s forever, `stop()` included, on a timer that keeps the process alive. This socket retries
 * with back-off on an unref'd timer, holds a bounded queue meanwhile, and stops for good.
 * Rejects with a ConfigError for a URL that is not ws:// or wss://.
 */
export async function createXStateInspector(options: XStateInspectorOptions): Promise<XStateInspector> {
  const url = checkInspectorUrl(options.url);
  const onError = options.onError ?? (() => {});
  const socket = new InspectorSocket(url, onError);
  const { createInspector } = await statelyInspect.load();
  const inspector = createInspector(socket);
  if (options.autoStart !== false) socket.start();
  return {
    inspect: (event) => {
      // The library defers its work to a timer; a failure here must not reach the actor.
      try {
        inspector.inspect.next?.(event);
      } catch (error) {
        onError(error as Error);
      }
    },
    start: () => socket.start(),
    stop: () => socket.stop(),
  };
}

function checkInspectorUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`inspect.websocket_url (INSPECT_WEBSOCKET_URL): not a URL: ${value}`);
  }
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:') {
    throw new ConfigError(`inspect.websocket_url (INSPECT_WEBSOCKET_URL): expected a ws:// or wss:// URL, got ${url.protocol}//`);
  }
  return url.href;
}

/** The inspector's transport: one WebSocket, reconnected with back-off until stopped. */
class InspectorSocket {
  private socket: WebSocket | undefined;
  private readonly queue: string[] = [];
  private running = false;
  private retry: NodeJS.Timeout | undefined;
  private retryMs = FIRST_RETRY_MS;

  constructor(
    private readonly url: string,
    private readonly onError: (error: Error) => void,
  ) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.connect();
  }

  stop(): void {
    this.running = false;
    clearTimeout(this.retry);
    this.socket?.close();
    this.socket = undefined;
    this.queue.length = 0;
  }

  /** The adapter's `send`: at once when connected, otherwise queued (bounded). */
  send(event: StatelyInspectionEvent): void {
    let text: string;
    try {
      text = JSON.stringify(event);
    } catch (error) {
      this.onError(error as Error);
      return;
    }
    if (this.socket?.readyState === WebSocket.OPEN) {
      this.socket.send(text);
      return;
    }
    if (!this.running) return;
    this.queue.push(text);
    if (this.queue.length > MAX_QUEUED_EVENTS) this.queue.shift();
  }

  private connect(): void {
    const socket = new WebSocket(this.url);
    this.socket = socket;
    socket.addEventListener('open', () => {
      this.retryMs = FIRST_RETRY_MS;
      for (const text of this.queue.splice(0)) socket.send(text);
    });
    // A failed connection ends with a close too: that is where the retry is scheduled.
    socket.addEventListener('close', () => {
      if (this.socket !== socket || !this.running) return;
      this.socket = undefined;
      this.retry = setTimeout(() => this.connect(), this.retryMs);
      this.retry.unref();
      this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS);
    });
  }
}
