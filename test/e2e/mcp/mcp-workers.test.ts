import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { Agent } from 'undici';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { connectMcp, toolText } from '../../support/mcp-client.js';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { EVERYTHING_STDIO_YAML, freePort, mcpDeploymentFile } from '../../support/mcp-fixtures.js';
import { killToExit } from '../../support/run-to-exit.js';
import { createServerSchema, type ServerSchema } from '../../support/server-schema.js';
import { waitFor } from '../../support/wait-for.js';

/** One JSON log line of the service. */
type LogLine = { message?: string; process?: string };

describe('the MCP server on several workers (app.workers, PostgreSQL)', function () {
  this.timeout(120_000);
  let llm: FakeLlm;
  let schema: ServerSchema;
  let folder: string;
  let primary: ChildProcess;
  let port: number;
  let log = '';
  const agents: Agent[] = [];

  before(async function () {
    if (!process.env.TEST_DATABASE_URL) this.skip();
    llm = await startFakeLlm();
    schema = await createServerSchema(process.env.TEST_DATABASE_URL!, 'mcp_workers');
    folder = mkdtempSync(join(tmpdir(), 'svc-mcp-workers-'));
    port = await freePort();
    primary = spawn(process.execPath, ['--import', 'tsx', 'gateway/server/main.ts'], {
      env: {
        ...process.env,
        APP_WORKERS: '2',
        APP_HOST: '127.0.0.1',
        APP_PORT: String(port),
        DB_URL: schema.url,
        DB_POOL_SIZE: '3',
        LLM_BASE_URL: llm.url,
        LOG_LEVEL: 'info',
        LOG_FORMAT: 'json',
        SESSIONS_LEASE_MS: '2000',
        CONFIG_FILE: mcpDeploymentFile(folder, `${EVERYTHING_STDIO_YAML}    require_approval: [get-sum]\n`),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    primary.stdout!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    primary.stderr!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    await waitFor(() => log.includes('2 workers listening') || primary.exitCode !== null, 'the workers to listen', 90_000);
    expect(primary.exitCode, log).to.equal(null);
  });
  after(async () => {
    if (primary) await killToExit(primary);
    await Promise.all(agents.map((agent) => agent.close()));
    await schema?.drop();
    await llm?.close();
    if (folder) rmSync(folder, { recursive: true, force: true });
  });

  /**
   * Each request on a connection of its own, kept open: the primary hands each new connection to
   * the worker holding the fewest, so a session's requests go to one worker, then the other.
   */
  const newConnectionEach: FetchLike = (url, init) => {
    const agent = new Agent({ keepAliveTimeout: 60_000 });
    agents.push(agent);
    return fetch(url, { ...init, dispatcher: agent } as RequestInit);
  };

  /** The worker that served each of the MCP requests logged so far, as `<method> <status> <worker>`. */
  function mcpRequests(): string[] {
    return log
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as LogLine)
      .filter((line) => line.message?.includes(' /mcp '))
      .map((line) => `${line.message!.split(' ').slice(0, 3).join(' ')} ${line.process}`);
  }

  it('continues one MCP session on both workers, and runs a held call when the answer to its form reaches the other worker', async () => {
    const { client } = await connectMcp(`http://127.0.0.1:${port}`, { fetch: newConnectionEach, elicit: () => ({ action: 'accept', content: { approve: true } }) });
    try {
      await client.callTool({ name: 'svc-agent', arguments: { message: 'My name is Ada' } });
      const context = await client.callTool({ name: 'svc-agent', arguments: { message: '[[echo-context]]' } });
      expect(toolText(context)).to.include('My name is Ada');
      const summed = await client.callTool({ name: 'svc-agent', arguments: { message: 'Add them up [[tool:everything__get-sum {"a":2,"b":3}]]' } });
      expect(toolText(summed)).to.match(/^Tool result: .*\b5\b/);
      // initialize and the three calls answered 200; notifications/initialized and the answer to the form 202.
      const count = (prefix: string) => mcpRequests().filter((entry) => entry.startsWith(prefix)).length;
      await waitFor(() => count('POST /mcp 200') === 4 && count('POST /mcp 202') === 2, 'the log lines of the requests');
      const served = mcpRequests();
      expect(new Set(served.map((entry) => entry.split(' ').at(-1)))).to.have.property('size', 2);
      // The call that asked (the last 200) and the answer to its form (the last 202) were served by different workers.
      const answer = served.filter((entry) => entry.startsWith('POST /mcp 202')).at(-1)!;
      const call = served.filter((entry) => entry.startsWith('POST /mcp 200')).at(-1)!;
      expect(answer.split(' ').slice(-2).join(' ')).to.not.equal(call.split(' ').slice(-2).join(' '));
    } finally {
      await client.close();
    }
  });
});
