import { spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';
import type { McpServerConfig } from '../../config/mcp-server-schema.js';

/** The stdio entry of the test server, run with tsx. */
export const TEST_SERVER_STDIO_ENTRY = fileURLToPath(new URL('./mcp-test-server-stdio.ts', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Counters a test server keeps, reported by its `stats` tool. */
type Stats = { cancelled: number };

/** Where `whoami` finds the caller's token: the process environment (stdio) or the request's Authorization header (http). */
type Mode = 'stdio' | 'http';

/**
 * Our own MCP test server: `whoami` (the token it received), `hang` (answers only when
 * cancelled), `stats`, `dotted.name`, `request-meta` (its request's `_meta`); over stdio also `crash` (exits mid-call),
 * `malformed` (answers with a result that breaks the schema), `spawn-helper` (starts a
 * helper process that ignores SIGTERM) and `slow-write` (a side effect in a file, then a slow answer).
 */
export function createTestMcpServer(mode: Mode, stats: Stats = { cancelled: 0 }): McpServer {
  const server = new McpServer({ name: 'svc-test-server', version: '1.0.0' });
  const json = (value: unknown) => ({ content: [{ type: 'text' as const, text: JSON.stringify(value) }] });

  server.registerTool('whoami', { description: 'Reports the access token this server received and its pid' }, (extra) => {
    if (mode === 'stdio') {
      return json({ token: process.env.MCP_USER_ACCESS_TOKEN ?? null, accessToken: process.env.ACCESS_TOKEN ?? null, pid: process.pid });
    }
    return json({ authorization: extra.requestInfo?.headers.authorization ?? null, pid: process.pid });
  });

  server.registerTool('hang', { description: 'Never answers; counts the cancellation it receives' }, (extra) =>
    new Promise((resolve) => {
      extra.signal.addEventListener('abort', () => {
        stats.cancelled += 1;
        resolve(json({ cancelled: true }));
      });
    }),
  );

  server.registerTool('stats', { description: 'Reports how many calls were cancelled' }, () => json({ ...stats, pid: process.pid }));

  server.registerTool('dotted.name', { description: 'A tool whose name is not an OpenAI function name' }, () => json('dotted'));

  server.registerTool('request-meta', { description: 'Reports the _meta of the request that called it' }, (extra) => json(extra._meta ?? null));

  if (mode === 'stdio') {
    server.registerTool('crash', { description: 'Exits the server process in the middle of the call' }, () => {
      process.stderr.write('crashing on purpose\n');
      process.exit(3);
    });

    server.registerTool('malformed', { description: 'Answers with a result whose content is not a list' }, (extra) => {
      // The SDK validates what a handler returns, so the broken answer is written by hand.
      process.stdout.write(`${JSON.stringify({ jsonrpc: '2.0', id: extra.requestId, result: { content: 'not a list' } })}\n`);
      return new Promise(() => {});
    });

    // A tool with a side effect: each call appends a line to the file named by MCP_TEST_WRITES_FILE
    // at its start, then answers after `ms`. The file outlives the server and the service.
    server.registerTool(
      'slow-write',
      { description: 'Writes a line (a side effect), then answers after ms milliseconds', inputSchema: { ms: z.number().int().nonnegative() } },
      async ({ ms }, extra) => {
        appendFileSync(process.env.MCP_TEST_WRITES_FILE ?? '/dev/null', `${String(extra._meta?.['io.svc-agent/idempotency-key'] ?? '')}\n`);
        await new Promise((resolve) => setTimeout(resolve, ms));
        return json('written');
      },
    );

    server.registerTool('spawn-helper', { description: 'Starts a helper process that ignores SIGTERM; reports its pid' }, async () => {
      const helper = spawn(
        process.execPath,
        ['-e', "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000); process.stdout.write('ready\\n')"],
        // It holds the server's stderr open, as a careless helper would.
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      // Answer only once the helper ignores SIGTERM, so the test sees the escalation to SIGKILL.
      await new Promise((resolve) => helper.stdout?.once('data', resolve));
      helper.stdout?.destroy();
      return json({ pid: helper.pid });
    });
  }
  return server;
}

/** The registry configuration of the stdio test server, run through tsx. */
export function testServerStdioConfig(overrides: Partial<Extract<McpServerConfig, { transport: 'stdio' }>> = {}): McpServerConfig {
  return {
    transport: 'stdio',
    command: process.execPath,
    args: ['--import', 'tsx', TEST_SERVER_STDIO_ENTRY],
    env: {},
    cwd: REPO_ROOT,
    per_user: false,
    require_approval: 'never',
    idempotent: false,
    ...overrides,
  };
}

/** A running HTTP test server. */
export type HttpTestServer = { url: string; stats: Stats; close(): Promise<void> };

/** Serves the test server over streamable HTTP (stateless) on 127.0.0.1 and a free port. */
export async function startHttpTestMcpServer(): Promise<HttpTestServer> {
  const stats: Stats = { cancelled: 0 };
  const http = createServer((req, res) => void handle(req, res));

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== 'POST') {
      res.writeHead(405, { Allow: 'POST' }).end();
      return;
    }
    const server = createTestMcpServer('http', stats);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(req, res);
    } catch (error) {
      if (!res.headersSent) res.writeHead(500).end(String(error));
    }
  }

  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    stats,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
