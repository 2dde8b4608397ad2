import { expect } from 'chai';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { agentSessionOf } from '../../../gateway/mcp/mcp-session-ids.js';
import { startTestService, type TestService } from '../../support/service-harness.js';
import { waitFor } from '../../support/wait-for.js';
import { connectMcp, toolText, type McpConnection } from '../../support/mcp-client.js';

/** A raw JSON-RPC POST to /mcp, as a client that does not use the SDK sends it. */
async function post(harness: TestService, body: string, headers: Record<string, string> = {}): Promise<{ status: number; json: unknown; text: string; headers: Headers }> {
  const response = await fetch(`${harness.service.url}/mcp`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
    body,
  });
  const text = await response.text();
  const isJson = response.headers.get('content-type')?.startsWith('application/json') ?? false;
  return { status: response.status, json: isJson ? (JSON.parse(text) as unknown) : null, text, headers: response.headers };
}

describe('the MCP server at /mcp', function () {
  this.timeout(30_000);
  let harness: TestService;
  const clients: McpConnection[] = [];

  before(async () => {
    harness = await startTestService();
  });
  after(async () => {
    await harness?.close();
  });
  beforeEach(() => harness.llm.reset());
  afterEach(async () => {
    await Promise.all(clients.splice(0).map(({ client }) => client.close()));
  });

  async function connected(options: { sessionId?: string } = {}): Promise<McpConnection> {
    const connection = await connectMcp(harness.service.url, options);
    clients.push(connection);
    return connection;
  }

  it('lists the agent as one tool named after the agent when a client connects', async () => {
    const { client, transport } = await connected();
    expect(transport.sessionId).to.match(/^[0-9a-f]{32}$/);
    expect(client.getServerVersion()?.name).to.equal('svc-agent');
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).to.deep.equal(['svc-agent']);
    const [tool] = tools;
    expect(tool!.inputSchema).to.deep.include({ type: 'object', required: ['message'] });
    // The description comes from the graph's agent state.
    expect(tool!.description).to.include('The agent reasons over the conversation and replies, or asks for tools.');
  });

  it("answers a call with the agent's reply when a client calls the tool", async () => {
    const { client } = await connected();
    const result = await client.callTool({ name: 'svc-agent', arguments: { message: 'Hello there' } });
    expect(result.isError).to.not.equal(true);
    expect(toolText(result)).to.equal('Echo: Hello there');
    expect(harness.llm.requests.filter((request) => request.kind === 'chat')).to.have.length(1);
  });

  it('continues the conversation when a second call comes in the same MCP session', async () => {
    const { client } = await connected();
    await client.callTool({ name: 'svc-agent', arguments: { message: 'My name is Ada' } });
    const second = await client.callTool({ name: 'svc-agent', arguments: { message: 'Who am I? [[echo-context]]' } });
    const context = JSON.parse(toolText(second)) as Array<{ role: string; content: string }>;
    expect(context.slice(1).map(({ role, content }) => ({ role, content }))).to.deep.equal([
      { role: 'user', content: 'My name is Ada' },
      { role: 'assistant', content: 'Echo: My name is Ada' },
      { role: 'user', content: 'Who am I? [[echo-context]]' },
    ]);
  });

  it('starts a conversation of its own when another MCP session calls', async () => {
    const { client: first } = await connected();
    await first.callTool({ name: 'svc-agent', arguments: { message: 'My name is Ada' } });
    const { client: second } = await connected();
    const result = await second.callTool({ name: 'svc-agent', arguments: { message: '[[echo-context]]' } });
    const context = JSON.parse(toolText(result)) as Array<{ role: string }>;
    expect(context.slice(1).map(({ role }) => role)).to.deep.equal(['user']);
  });

  it('streams the reply as progress notifications when the call has a progress token', async () => {
    const { client } = await connected();
    const notes: Array<{ progress: number; message?: string }> = [];
    const result = await client.callTool({ name: 'svc-agent', arguments: { message: 'one two three four five six seven eight nine ten [[pace:60]]' } }, undefined, {
      onprogress: (progress) => notes.push({ progress: progress.progress, message: progress.message }),
    });
    const text = toolText(result);
    expect(text).to.equal('Echo: one two three four five six seven eight nine ten [[pace:60]]');
    expect(notes.length).to.be.greaterThan(1);
    // Each carries the text since the one before; together they are the reply, and progress counts its characters.
    expect(notes.map((note) => note.message).join('')).to.equal(text);
    for (let index = 1; index < notes.length; index++) expect(notes[index]!.progress).to.be.greaterThan(notes[index - 1]!.progress);
    expect(notes.at(-1)!.progress).to.equal(text.length);
  });

  it('sends no progress notifications when the call has no progress token', async () => {
    const { client, transport } = await connected();
    const seen: string[] = [];
    const onmessage = transport.onmessage!;
    transport.onmessage = (message) => {
      if ('method' in message) seen.push(message.method);
      onmessage(message);
    };
    const result = await client.callTool({ name: 'svc-agent', arguments: { message: 'quietly [[pace:20]]' } });
    expect(toolText(result)).to.equal('Echo: quietly [[pace:20]]');
    expect(seen).to.deep.equal([]);
  });

  it('cancels the turn when the client cancels the call, so the next call is answered at once', async () => {
    const { client } = await connected();
    const cancel = new AbortController();
    const hanging = client.callTool({ name: 'svc-agent', arguments: { message: 'wait [[hang]]' } }, undefined, { signal: cancel.signal }).catch((error: unknown) => error);
    await waitFor(() => harness.llm.requests.length === 1, 'the LLM request of the first call');
    cancel.abort('changed my mind');
    await hanging;
    // The call's POST stays open: only notifications/cancelled, in a POST of its own, tells the turn.
    const next = await client.callTool({ name: 'svc-agent', arguments: { message: 'next' } }, undefined, { timeout: 5_000 });
    expect(toolText(next)).to.equal('Echo: next');
  });

  it('answers a failed turn as a tool error when the LLM fails', async () => {
    const { client } = await connected();
    const result = await client.callTool({ name: 'svc-agent', arguments: { message: 'break [[error:503]]' } });
    expect(result.isError).to.equal(true);
    expect(toolText(result)).to.match(/^Error: An error occurred during async LLM call: /);
  });

  it('answers a tool error naming the argument when the message is missing, empty or not a string', async () => {
    const { client } = await connected();
    const missing = await client.callTool({ name: 'svc-agent', arguments: {} });
    expect(missing.isError).to.equal(true);
    expect(toolText(missing)).to.match(/'message' is required/);
    const empty = await client.callTool({ name: 'svc-agent', arguments: { message: '   ' } });
    expect(empty.isError).to.equal(true);
    expect(toolText(empty)).to.match(/'message' must not be empty/);
    const number = await client.callTool({ name: 'svc-agent', arguments: { message: 42 } });
    expect(toolText(number)).to.match(/'message' must be a string, not number/);
    const extra = await client.callTool({ name: 'svc-agent', arguments: { message: 'hi', model: 'gpt' } });
    expect(extra.isError).to.equal(true);
    expect(toolText(extra)).to.match(/Unknown argument: model/);
    expect(harness.llm.requests).to.deep.equal([]);
  });

  it('answers a JSON-RPC invalid params error when the tool is unknown', async () => {
    const { client } = await connected();
    const error = await client.callTool({ name: 'other-agent', arguments: { message: 'hi' } }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).to.be.instanceOf(McpError);
    expect((error as McpError).code).to.equal(ErrorCode.InvalidParams);
    expect((error as McpError).message).to.include("Unknown tool: 'other-agent'");
  });

  it('answers JSON-RPC errors, never a crash, when the body is not JSON, not JSON-RPC, or has no session', async () => {
    const notJson = await post(harness, '{"jsonrpc": "2.0", ');
    expect({ status: notJson.status, json: notJson.json }).to.deep.equal({ status: 400, json: { jsonrpc: '2.0', error: { code: ErrorCode.ParseError, message: 'Parse error: the body is not valid JSON' }, id: null } });
    const notRpc = await post(harness, JSON.stringify({ hello: 'world' }));
    expect(notRpc.status).to.equal(400);
    expect(notRpc.json).to.deep.include({ jsonrpc: '2.0', id: null });
    expect((notRpc.json as { error: { code: number } }).error.code).to.equal(ErrorCode.InvalidRequest);
    const noSession = await post(harness, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }));
    expect(noSession.status).to.equal(400);
    expect((noSession.json as { error: { message: string } }).error.message).to.match(/Mcp-Session-Id header is required/);
    const unknownSession = await post(harness, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), { 'Mcp-Session-Id': 'not-a-session' });
    expect(unknownSession.status).to.equal(404);
    expect((unknownSession.json as { error: { code: number } }).error.code).to.equal(-32001);
    const unknownMethod = await post(harness, JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'prompts/list' }), { 'Mcp-Session-Id': '0'.repeat(32) });
    // A well-formed session id is served wherever it was minted: here the method is what is wrong.
    expect(unknownMethod.status).to.equal(200);
    expect(unknownMethod.text).to.include(`"code":${ErrorCode.MethodNotFound}`);
    // The agent session the MCP session's conversation lives in is named as chat completions name theirs.
    expect(unknownMethod.headers.get('x-session-id')).to.equal(agentSessionOf('0'.repeat(32), harness.config.memory.user_id));
    const tooLarge = await post(harness, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { padding: 'x'.repeat(2 * 1024 * 1024) } }));
    expect(tooLarge.status).to.equal(413);
    expect(tooLarge.json).to.deep.include({ jsonrpc: '2.0', id: null });
    const get = await fetch(`${harness.service.url}/mcp`, { headers: { Accept: 'text/event-stream' } });
    expect(get.status).to.equal(405);
    expect(get.headers.get('allow')).to.equal('POST, DELETE');
    // The service still answers.
    const { client } = await connected();
    expect(toolText(await client.callTool({ name: 'svc-agent', arguments: { message: 'still here' } }))).to.equal('Echo: still here');
  });

  it('answers a JSON-RPC method-not-found error when the method is not one of the server', async () => {
    const { client } = await connected();
    const error = await client.listPrompts().then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect((error as McpError).code).to.equal(ErrorCode.MethodNotFound);
  });

  it('ends the session, keeping its transcript, when the client deletes it', async () => {
    const { client, transport } = await connected();
    await client.callTool({ name: 'svc-agent', arguments: { message: 'Remember me' } });
    const sessionId = transport.sessionId!;
    await transport.terminateSession();
    const agentSession = agentSessionOf(sessionId, harness.config.memory.user_id);
    const row = await harness.service.database.db.selectFrom('sessions').select(['deleted_at']).where('session_id', '=', agentSession).executeTakeFirstOrThrow();
    expect(row.deleted_at).to.be.instanceOf(Date);
    const kept = await harness.service.database.db.selectFrom('conversations').select('message').where('session_id', '=', agentSession).orderBy('id').execute();
    expect(kept.map((turn) => turn.message)).to.deep.equal(['Remember me', 'Echo: Remember me']);
    // The ended session is not found any more: the client must start a new one.
    const again = await post(harness, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), { 'Mcp-Session-Id': sessionId });
    expect(again.status).to.equal(404);
    const deleteAgain = await fetch(`${harness.service.url}/mcp`, { method: 'DELETE', headers: { 'Mcp-Session-Id': sessionId } });
    expect(deleteAgain.status).to.equal(404);
  });
});
