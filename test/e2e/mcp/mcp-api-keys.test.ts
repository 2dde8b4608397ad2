import { expect } from 'chai';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { agentSessionOf } from '../../../gateway/mcp/mcp-session-ids.js';
import { startTestService, type TestService } from '../../support/service-harness.js';
import { connectMcp, toolText, type McpConnection } from '../../support/mcp-client.js';

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'curl', version: '1' } },
});

describe('the MCP server with API keys (API_KEYS)', function () {
  this.timeout(30_000);
  let harness: TestService;
  const clients: Client[] = [];

  before(async () => {
    harness = await startTestService({ env: { API_KEYS: 'admin-key, ada-key:ada, bob-key:bob' } });
  });
  after(async () => {
    await harness?.close();
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((client) => client.close()));
  });

  async function connect(headers: Record<string, string>, sessionId?: string): Promise<McpConnection> {
    const connection = await connectMcp(harness.service.url, { headers, sessionId });
    clients.push(connection.client);
    return connection;
  }

  async function ownerOf(agentSession: string): Promise<string | undefined> {
    const row = await harness.service.database.db.selectFrom('sessions').select('user_id').where('session_id', '=', agentSession).executeTakeFirst();
    return row?.user_id;
  }

  it('refuses a request without a key (401, missing_api_key) and one with a wrong key (401, invalid_api_key)', async () => {
    const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
    const missing = await fetch(`${harness.service.url}/mcp`, { method: 'POST', headers, body: INITIALIZE });
    expect(missing.status).to.equal(401);
    expect(((await missing.json()) as { error: { code: string } }).error.code).to.equal('missing_api_key');
    const wrong = await fetch(`${harness.service.url}/mcp`, { method: 'POST', headers: { ...headers, Authorization: 'Bearer nope' }, body: INITIALIZE });
    expect(wrong.status).to.equal(401);
    expect(((await wrong.json()) as { error: { code: string } }).error.code).to.equal('invalid_api_key');
    // The SDK's client gets the refusal too.
    const refused = await connect({}).then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(refused?.message).to.include('missing_api_key');
    expect((refused as Error & { code?: number }).code).to.equal(401);
  });

  it("serves a Bearer key and acts as the key's user", async () => {
    const { client, transport } = await connect({ Authorization: 'Bearer ada-key' });
    expect(toolText(await client.callTool({ name: 'svc-agent', arguments: { message: 'Hi, I am Ada' } }))).to.equal('Echo: Hi, I am Ada');
    expect(await ownerOf(agentSessionOf(transport.sessionId!, 'ada'))).to.equal('ada');
  });

  it('refuses a user-bound key naming another user in X-User-ID (403), and lets an admin key name one', async () => {
    const forbidden = await fetch(`${harness.service.url}/mcp`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', Authorization: 'Bearer ada-key', 'X-User-ID': 'bob' },
      body: INITIALIZE,
    });
    expect(forbidden.status).to.equal(403);
    expect(((await forbidden.json()) as { error: { code: string } }).error.code).to.equal('forbidden');
    const { client, transport } = await connect({ Authorization: 'Bearer admin-key', 'X-User-ID': 'carol' });
    await client.callTool({ name: 'svc-agent', arguments: { message: 'Hello' } });
    expect(await ownerOf(agentSessionOf(transport.sessionId!, 'carol'))).to.equal('carol');
  });

  it("never continues another user's conversation when their MCP session id is presented with another key", async () => {
    const ada = await connect({ Authorization: 'Bearer ada-key' });
    await ada.client.callTool({ name: 'svc-agent', arguments: { message: 'My secret is 42' } });
    const bob = await connect({ Authorization: 'Bearer bob-key' }, ada.transport.sessionId);
    const result = await bob.client.callTool({ name: 'svc-agent', arguments: { message: '[[echo-context]]' } });
    const context = JSON.parse(toolText(result)) as Array<{ role: string; content: string }>;
    expect(JSON.stringify(context)).to.not.include('My secret is 42');
    expect(context.slice(1).map(({ role }) => role)).to.deep.equal(['user']);
    expect(await ownerOf(agentSessionOf(ada.transport.sessionId!, 'bob'))).to.equal('bob');
  });
});
