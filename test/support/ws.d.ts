/** The little of `ws` (installed with @statelyai/inspect, without types) the tests use. */
declare module 'ws' {
  import type { EventEmitter } from 'node:events';
  import type { AddressInfo } from 'node:net';

  export class WebSocket extends EventEmitter {
    close(): void;
  }

  export class WebSocketServer extends EventEmitter {
    constructor(options: { port: number; host?: string });
    readonly clients: Set<WebSocket>;
    address(): AddressInfo | string;
    close(callback?: (error?: Error) => void): void;
  }
}
