import { createServer } from 'node:http';
import { ACCEPTING, acceptHandedConnections } from '../../gateway/server/connection-handoff.js';

/**
 * A cluster worker for the connection hand-off tests. HANDOFF_MODE=serve: serves the
 * connections the primary hands it, answering every request with its pid. HANDOFF_MODE=stall:
 * tells the primary it accepts connections and, once that message is written, blocks its
 * event loop for good, so that it never takes one, as a worker does in the instant it dies.
 */
if (process.env.HANDOFF_MODE === 'stall') {
  process.send!(ACCEPTING, () => {
    for (;;);
  });
} else {
  const server = createServer((_request, response) => response.end(String(process.pid)));
  server.listen({ port: 0, host: '127.0.0.1', exclusive: true }, () => acceptHandedConnections(server));
}
