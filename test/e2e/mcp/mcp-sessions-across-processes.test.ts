import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { servePgliteOverSocket } from '../../support/databases.js';
import { EVERYTHING_STDIO_YAML, mcpDeploymentFile } from '../../support/mcp-fixtures.js';
import { createServerSchema } from '../../support/server-schema.js';
import { startTestService, type TestService } from '../../support/service-harness.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { connectMcp, toolText, type McpConnection } from '../../support/mcp-client.js';

/** A database two processes share; `notifies`: a NOTIFY reaches the other process's LISTEN. */
type SharedDatabase = { name: string; notifies: boolean; open(): Promise<{ url: string; close(): Promise<void> }> };

/**
 * Two services on one database stand for two workers or two instances. pglite-socket does not
 * pass a NOTIFY on to its other clients; the service runs several processes on a PostgreSQL
 * server only (app.workers), so the relay of elicitation answers is tested there.
 */
const databases: SharedDatabase[] = [{ name: 'PGlite over pglite-socket', notifies: false, open: () => servePgliteOverSocket() }];
if (process.env.TEST_DATABASE_URL) {
  const baseUrl = process.env.TEST_DATABASE_URL;
  databases.push({
    name: 'the PostgreSQL server',
    notifies: true,
    open: async () => {
      const schema = await createServerSchema(baseUrl, 'mcp');
      return { url: schema.url, close: schema.drop };
    },
  });
}

/** The roles and contents after the system prompt of an `[[echo-context]]` reply. */
function dialogueOf(result: unknown): Array<{ role: string; content: string }> {
  return (JSON.parse(toolText(result)) as Array<{ role: string; content: string }>).slice(1).map(({ role, content }) => ({ role, content }));
}

/** A client of `service`; with `elicits`, one that approves every form. */
function connect(service: TestService, options: { sessionId?: string; fetch?: typeof fetch; elicits?: boolean } = {}): Promise<McpConnection> {
  const { elicits, ...rest } = options;
  return connectMcp(service.service.url, { ...rest, ...(elicits ? { elicit: () => ({ action: 'accept', content: { approve: true } }) } : {}) });
}

describe('an MCP session after the service restarts on the same data folder', function () {
  this.timeout(60_000);
  let folder: string;
  let llm: FakeLlm;
  let service: TestService | undefined;

  before(async () => {
    folder = mkdtempSync(join(tmpdir(), 'svc-mcp-restart-'));
    llm = await startFakeLlm();
  });
  after(async () => {
    await service?.close();
    await llm?.close();
    rmSync(folder, { recursive: true, force: true });
  });

  it('continues the conversation when the client comes back with its session id', async () => {
    const env = { DATA_DIR: join(folder, 'data') };
    service = await startTestService({ llm, env });
    const first = await connect(service);
    await first.client.callTool({ name: 'svc-agent', arguments: { message: 'My name is Ada' } });
    const sessionId = first.transport.sessionId!;
    await first.client.close();
    await service.close();

    service = await startTestService({ llm, env });
    const again = await connect(service, { sessionId });
    const result = await again.client.callTool({ name: 'svc-agent', arguments: { message: 'Who am I? [[echo-context]]' } });
    expect(dialogueOf(result)).to.deep.equal([
      { role: 'user', content: 'My name is Ada' },
      { role: 'assistant', content: 'Echo: My name is Ada' },
      { role: 'user', content: 'Who am I? [[echo-context]]' },
    ]);
    await again.client.close();
  });
});

for (const shared of databases) {
  describe(`MCP sessions across two service processes on ${shared.name}`, function () {
    this.timeout(60_000);
    let llm: FakeLlm;
    let database: { url: string; close(): Promise<void> };
    let folder: string;
    let first: TestService;
    let second: TestService;
    const clients: Client[] = [];

    before(async () => {
      llm = await startFakeLlm();
      database = await shared.open();
      folder = mkdtempSync(join(tmpdir(), 'svc-mcp-two-'));
      const env = {
        DB_URL: database.url,
        DB_POOL_SIZE: '4',
        SESSIONS_LEASE_MS: '1500',
        CONFIG_FILE: mcpDeploymentFile(folder, `${EVERYTHING_STDIO_YAML}    require_approval: [get-sum]\n`),
      };
      first = await startTestService({ llm, env });
      second = await startTestService({ llm, env });
    });
    after(async () => {
      await Promise.all(clients.map((client) => client.close()));
      await first?.close();
      await second?.close();
      await database?.close();
      await llm?.close();
      rmSync(folder, { recursive: true, force: true });
    });

    it('continues on one process the conversation an MCP session began on the other', async () => {
      const onFirst = await connect(first);
      clients.push(onFirst.client);
      await onFirst.client.callTool({ name: 'svc-agent', arguments: { message: 'My name is Ada' } });
      // The second process never saw this session's initialize.
      const onSecond = await connect(second, { sessionId: onFirst.transport.sessionId });
      clients.push(onSecond.client);
      const result = await onSecond.client.callTool({ name: 'svc-agent', arguments: { message: 'Who am I? [[echo-context]]' } });
      expect(dialogueOf(result)).to.deep.equal([
        { role: 'user', content: 'My name is Ada' },
        { role: 'assistant', content: 'Echo: My name is Ada' },
        { role: 'user', content: 'Who am I? [[echo-context]]' },
      ]);
    });

    (shared.notifies ? it : it.skip)('runs the held call when the answer to the elicitation reaches the other process', async () => {
      const firstUrl = `${first.service.url}/mcp`;
      const answersSent: string[] = [];
      // The client's answer goes out on a connection of its own, which may reach any worker: here, always the other process.
      const routed: typeof fetch = (input, init) => {
        const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as { result?: unknown; method?: string }) : undefined;
        if (String(input) === firstUrl && body && 'result' in body && body.method === undefined) {
          answersSent.push(second.service.url);
          return fetch(`${second.service.url}/mcp`, init);
        }
        return fetch(input, init);
      };
      const { client } = await connect(first, { fetch: routed, elicits: true });
      clients.push(client);
      const result = await client.callTool({ name: 'svc-agent', arguments: { message: 'Add them up [[tool:everything__get-sum {"a":2,"b":3}]]' } });
      expect(answersSent).to.deep.equal([second.service.url]);
      expect(toolText(result)).to.match(/^Tool result: .*\b5\b/);
    });
  });
}
