import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { createPassthroughApp } from './passthrough-app.js';

/** CLI: `passthrough.ts --upstream http://127.0.0.1:N [--port N]`; prints `passthrough listening on <url>`. */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { upstream: { type: 'string' }, port: { type: 'string', default: '0' }, host: { type: 'string', default: '127.0.0.1' } },
  });
  if (!values.upstream) throw new Error('--upstream is required');
  const { app, close } = createPassthroughApp(new URL(values.upstream).origin);
  const server = app.listen(Number(values.port), values.host);
  server.once('listening', () => {
    const { port } = server.address() as AddressInfo;
    console.log(`passthrough listening on http://${values.host}:${port}`);
  });
  const stop = () => {
    server.close();
    server.closeAllConnections();
    void close().finally(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((error: unknown) => {
  console.error(`passthrough: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
