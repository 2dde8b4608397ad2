import type { Server } from 'node:http';
import type { HandedConnections } from './connection-handoff.js';

/** How often connections that have become idle are closed while draining. */
const IDLE_SWEEP_MS = 100;

/**
 * Stops the HTTP server gracefully: no new connections, every response from now on closes
 * its connection, idle keep-alive connections are closed as they become idle, and requests
 * in flight (streams included) may finish for `timeoutMs`; then the rest are cut, which
 * cancels their turns. Resolves once every connection is closed; `forced` says whether any
 * had to be cut. A cluster worker passes the connections the primary handed it, which
 * `server.close` does not count.
 */
export async function drainServer(server: Server, timeoutMs: number, handed?: HandedConnections): Promise<{ forced: boolean }> {
  server.prependListener('request', (_request, response) => {
    if (!response.headersSent) response.setHeader('Connection', 'close');
  });
  const closed = Promise.all([new Promise<void>((resolve) => server.close(() => resolve())), handed?.allClosed()]);
  const sweep = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
  server.closeIdleConnections();
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
