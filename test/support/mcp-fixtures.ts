import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { McpServerConfig } from '../../config/mcp-server-schema.js';
import { EventBus } from '../../runtime/observability/event-bus.js';
import { createMcpRegistry, type McpRegistry, type McpRegistryOptions } from '../../runtime/tools/mcp-registry.js';
import type { AccessTokenSource } from '../../runtime/ports.js';
import type { ToolCallResult } from '../../runtime/tools/tool-runner.js';
import { freePort } from '../../scripts/bench/child-process.js';
import { TEST_SERVER_STDIO_ENTRY } from './mcp-test-server.js';
import { killToExit } from './run-to-exit.js';
import { waitFor } from './wait-for.js';

/** The entry script of `@modelcontextprotocol/server-everything`. */
export const EVERYTHING_ENTRY = fileURLToPath(
  new URL('../../node_modules/@modelcontextprotocol/server-everything/dist/index.js', import.meta.url),
);

/** server-everything over stdio, as a registry entry. */
export function everythingStdioConfig(): McpServerConfig {
  return { transport: 'stdio', command: process.execPath, args: [EVERYTHING_ENTRY, 'stdio'], env: {}, per_user: false, require_approval: 'never', idempotent: false };
}

/** The `mcp_servers` YAML entry `everything`: server-everything over stdio. */
export const EVERYTHING_STDIO_YAML = `  everything:\n    transport: stdio\n    command: ${JSON.stringify(process.execPath)}\n    args: [${JSON.stringify(EVERYTHING_ENTRY)}, stdio]\n`;

/** Writes a deployment file in `folder` whose mcp_servers section is `servers` (YAML); returns its path. */
export function mcpDeploymentFile(folder: string, servers: string): string {
  const path = join(folder, 'deployment.yaml');
  writeFileSync(path, `mcp_servers:\n${servers}`);
  return path;
}

/**
 * The `mcp_servers` entry of a stdio test server `name` whose `slow-write` calls append a line
 * (the call's idempotency key) to `writes` as they start: a side effect that outlives every
 * process, counted by the test. `idempotent` declares its calls safe to repeat; `approval`
 * makes every call wait for the user's approval.
 */
export function writerServer(name: string, writes: string, options: { idempotent: boolean; approval?: boolean }): string {
  return [
    `  ${name}:`,
    '    transport: stdio',
    `    command: ${JSON.stringify(process.execPath)}`,
    `    args: ["--import", "tsx", ${JSON.stringify(TEST_SERVER_STDIO_ENTRY)}]`,
    `    cwd: ${JSON.stringify(fileURLToPath(new URL('../../', import.meta.url)))}`,
    `    env: { MCP_TEST_WRITES_FILE: ${JSON.stringify(writes)} }`,
    ...(options.approval ? ['    require_approval: always'] : []),
    `    idempotent: ${options.idempotent}`,
    '',
  ].join('\n');
}

/** A stdio tool server that is slow to start: server-everything behind a gate the test opens. */
export type GatedServer = {
  /** Its `mcp_servers` YAML entry. */
  yaml: string;
  /** Lets the server start (it is held until then). */
  open(): void;
  /** The pid of the server's process once it runs (held at the gate or serving). */
  pid(): Promise<number>;
};

/**
 * Writes, in `folder`, a stdio command that waits until the test opens its gate and then
 * becomes server-everything, and returns it as the tool server `name`: a server whose start
 * takes as long as the test wants.
 */
export function gatedEverythingServer(folder: string, name: string): GatedServer {
  const gate = join(folder, `${name}.open`);
  const pidFile = join(folder, `${name}.pid`);
  const script = join(folder, `${name}.sh`);
  writeFileSync(
    script,
    [
      `echo $$ > ${JSON.stringify(pidFile)}`,
      `while [ ! -e ${JSON.stringify(gate)} ]; do sleep 0.05; done`,
      `exec ${JSON.stringify(process.execPath)} ${JSON.stringify(EVERYTHING_ENTRY)} stdio`,
      '',
    ].join('\n'),
  );
  return {
    yaml: `  ${name}:\n    transport: stdio\n    command: /bin/sh\n    args: [${JSON.stringify(script)}]\n`,
    open: () => writeFileSync(gate, ''),
    pid: async () => Number(await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim(), `the ${name} server's process`)),
  };
}

/** A free TCP port on 127.0.0.1 (the benchmark's helper). */
export { freePort };

/** server-everything over streamable HTTP, started by the test. */
export type EverythingHttp = { url: string; port: number; child: ChildProcess; stop(): Promise<void> };

/** Starts server-everything with `streamableHttp` on `port` (a free one unless given) and waits until it listens. */
export async function startEverythingHttp(port?: number): Promise<EverythingHttp> {
  port ??= await freePort();
  const child = spawn(process.execPath, [EVERYTHING_ENTRY, 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    let stderr = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (text: string) => {
      stderr += text;
      if (stderr.includes(`listening on port ${port}`)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`server-everything exited with code ${code}: ${stderr}`)));
  });
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    port,
    child,
    stop: () => killToExit(child),
  };
}

/** A registry with test-friendly defaults (short back-off and grace times). */
export function testRegistry(options: Partial<McpRegistryOptions> & Pick<McpRegistryOptions, 'servers'>): McpRegistry & { events: EventBus } {
  const events = options.events ?? new EventBus();
  const registry = createMcpRegistry({
    connectTimeoutMs: 15_000,
    callTimeoutMs: 15_000,
    userProcessIdleMs: 60_000,
    retry: { initialMs: 50, maxMs: 200 },
    killGraceMs: 300,
    ...options,
    events,
  });
  return Object.assign(registry, { events });
}

/** Calls `name` with `args` (an object is sent as JSON, a string as is). */
export function callTool(
  registry: McpRegistry,
  name: string,
  args: Record<string, unknown> | string = {},
  scope: { userId?: string; sessionId?: string; signal?: AbortSignal } = {},
): Promise<ToolCallResult> {
  return registry.call(
    { id: `call-${name}`, type: 'function', function: { name, arguments: typeof args === 'string' ? args : JSON.stringify(args) } },
    { userId: scope.userId ?? 'user-a', sessionId: scope.sessionId ?? 'session-1', signal: scope.signal ?? new AbortController().signal },
  );
}

/** The JSON a test-server tool answered with. */
export function answer<T = Record<string, unknown>>(result: ToolCallResult): T {
  if (result.isError) throw new Error(`the tool failed: ${result.content}`);
  return JSON.parse(result.content) as T;
}

/** An in-memory token source: set or delete `tokens` to connect or disconnect a user. */
export function fakeTokenSource(): AccessTokenSource & { tokens: Map<string, string> } {
  const tokens = new Map<string, string>();
  return {
    tokens,
    getAccessToken: async (userId) => tokens.get(userId) ?? null,
    loginUrl: (userId) => `http://svc.test/auth/idp/login?user_id=${encodeURIComponent(userId)}`,
  };
}
