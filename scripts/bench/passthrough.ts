import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { createPassthroughApp } from './passthrough-app.js';

/**
 * CLI: `passthrough.ts --upstream http://127.0.0.1:N [--port N] [--db-url URL --pool-size N --history-turns N]`;
 * prints `passthrough listening on <url>`. With `--db-url` it is the persisted pass-through,
 * which sends the LLM a session's last `--history-turns` messages (default 20, the service's
 * `memory.short_term_turns`).
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      upstream: { type: 'string' },
      port: { type: 'string', default: '0' },
      host: { type: 'string', default: '127.0.0.1' },
      'db-url': { type: 'string' },
      'pool-size': { type: 'string', default: '10' },
      'history-turns': { type: 'string', default: '20' },
    },
  });
  if (!values.upstream) throw new Error('--upstream is required');
  const historyTurns = Number(values['history-turns']);
  if (!Number.isInteger(historyTurns) || historyTurns < 1) throw new Error(`--history-turns must be a whole number of at least 1, got '${values['history-turns']}'`);
  const database = values['db-url'] ? new pg.Pool({ connectionString: values['db-url'], max: Number(values['pool-size']) }) : undefined;
  const { app, close } = await createPassthroughApp(new URL(values.upstream).origin, database && { database, historyTurns });
  const server = app.listen(Number(values.port), values.host);
  server.once('listening', () => {
    const { port } = server.address() as AddressInfo;
    console.log(`passthrough listening on http://${values.host}:${port}`);
  });
  const stop = () => {
    server.close();
    server.closeAllConnections();
    void Promise.all([close(), database?.end()]).finally(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((error: unknown) => {
  console.error(`passthrough: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
