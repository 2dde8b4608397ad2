import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { HandedConnections } from './connection-handoff.js';

/** How often connections that have become idle are closed while draining. */
const IDLE_SWEEP_MS = 100;

/**
 * A server's connections, watched from the start: those on which no byte has come yet. Node
 * counts such a connection as busy (its headers time-out runs), so `closeIdleConnections` leaves
 * it, and a client that opened one ahead of a request (a browser, a pool) would hold a drain
 * until its time-out.
 */
export type WatchedConnections = { unused(): Socket[] };

/** Watches the connections `server` serves, its own and those handed to it, for `drainServer`. */
export function watchConnections(server: Server): WatchedConnections {
  const open = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  return { unused: () => [...open].filter((socket) => socket.bytesRead === 0) };
}

/** What else `drainServer` closes: the connections a cluster primary handed over, and those `watchConnections` saw. */
export type DrainOptions = { handed?: HandedConnections; watched?: WatchedConnections };

/**
 * Stops the HTTP server gracefully: no new connections, every response from now on closes
 * its connection, idle keep-alive connections and those no request came on are closed as
 * they are found, and requests in flight (streams included) may finish for `timeoutMs`; then
 * the rest are cut, which cancels their turns. Resolves once every connection is closed;
 * `forced` says whether any had to be cut. A cluster worker passes the connections the
 * primary handed it, which `server.close` does not count.
 */
export async function drainServer(server: Server, timeoutMs: number, options: DrainOptions = {}): Promise<{ forced: boolean }> {
  server.prependListener('request', (_request, response) => {
    if (!response.headersSent) response.setHeader('Connection', 'close');
  });
  const closed = Promise.all([new Promise<void>((resolve) => server.close(() => resolve())), options.handed?.allClosed()]);
  const closeIdle = () => {
    server.closeIdleConnections();
    for (const socket of options.watched?.unused() ?? []) socket.destroy();
  };
  const sweep = setInterval(closeIdle, IDLE_SWEEP_MS);
  closeIdle();
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<true>((resolve) => {
    timer = setTimeout(() => resolve(true), timeoutMs);
  });
  try {
    const forced = await Promise.race([closed.then(() => false as const), expired]);
    if (forced) {
      server.closeAllConnections();
      await closed;
    }
    return { forced };
  } finally {
    clearInterval(sweep);
    clearTimeout(timer);
  }
}
