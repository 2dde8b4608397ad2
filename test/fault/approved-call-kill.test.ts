import { expect } from 'chai';
import pg from 'pg';
import { waitFor } from '../support/wait-for.js';
import { useWriterService } from './writer-service.js';

const LEASE_MS = 1_000;
/** The approved call takes this long: the service is killed while it runs. */
const CALL_MS = 6_000;

const serverUrl = process.env.TEST_DATABASE_URL;
const onServer = serverUrl ? describe : describe.skip;

onServer(`the service killed while it carries out an approved call${serverUrl ? '' : ' (skipped: needs TEST_DATABASE_URL)'}`, function () {
  this.timeout(90_000);
  const fixture = useWriterService({ serverUrl: serverUrl!, leaseMs: LEASE_MS, approval: true });
  const written = fixture.written;


  async function chat(messages: Array<{ role: string; content: string }>, sessionId?: string): Promise<{ status: number; content: string; sessionId: string }> {
    const headers: Record<string, string> = { 'Content-Type': 'application/json' };
    if (sessionId) headers['X-Session-ID'] = sessionId;
    const response = await fetch(`http://127.0.0.1:${fixture.port}/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ messages }) });
    const body = (await response.json()) as { choices?: Array<{ message: { content: string } }>; error?: { message: string } };
    return { status: response.status, content: body.choices?.[0]?.message.content ?? body.error?.message ?? '', sessionId: response.headers.get('x-session-id') ?? '' };
  }

  async function transcript(sessionId: string): Promise<string[]> {
    const client = new pg.Client({ connectionString: fixture.databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query<{ role: string; message: string }>('select role, message from conversations where session_id = $1 order by id', [sessionId]);
      return rows.map((row) => `${row.role}: ${row.message}`);
    } finally {
      await client.end();
    }
  }

  /** Asks for an approved call of `server`'s slow-write, kills the service while it runs, starts it again and retries the approval. */
  async function killDuringApprovedCall(server: 'once' | 'again'): Promise<{ sessionId: string; retried: Awaited<ReturnType<typeof chat>> }> {
    const tool = `${server}__slow-write`;
    fixture.llm.script(
      { match: { lastUserIncludes: 'save it', hasToolResults: false }, reply: { toolCalls: [{ name: tool, arguments: { ms: CALL_MS } }] }, times: 1 },
      { match: { hasToolResults: true }, reply: { content: 'all done' } },
    );
    const asked = await chat([{ role: 'user', content: 'save it' }]);
    expect(asked.content).to.match(/^May I run the tool slow-write of the server/);
    const approving = chat([{ role: 'user', content: 'yes' }], asked.sessionId).catch(() => undefined);
    await waitFor(() => written(server).length === 1, 'the approved call to start', 20_000);
    await fixture.killAndRestart();
    await approving;
    // As the client tries again when its connection broke.
    const retried = await chat([{ role: 'user', content: 'yes' }], asked.sessionId);
    return { sessionId: asked.sessionId, retried };
  }

  it('does not run a call whose tool may not run twice again: the model is told its outcome is unknown, and the approval is stored once', async () => {
    const { sessionId, retried } = await killDuringApprovedCall('once');
    expect(retried).to.include({ status: 200, content: 'all done' });
    expect(written('once'), 'the call started once').to.have.length(1);
    const lastCall = fixture.llm.requests.filter((request) => request.kind === 'chat').at(-1)!;
    const toolMessage = lastCall.body.messages!.find((message) => message.role === 'tool');
    expect(String(toolMessage?.content)).to.match(/^Error: the outcome of this call of slow-write \(server once\) is unknown/);
    const stored = await transcript(sessionId);
    expect(stored.filter((row) => row === 'user: yes'), 'the approval').to.have.length(1);
    expect(stored.at(-1)).to.equal('assistant: all done');
    expect(stored.filter((row) => row.startsWith('tool: ') && row.includes('is unknown'))).to.have.length(1);
  });

  it('carries out the approval a Responses API retry sends again, instead of refusing it as not pending', async () => {
    const tool = 'once__slow-write';
    fixture.llm.script(
      { match: { lastUserIncludes: 'file it', hasToolResults: false }, reply: { toolCalls: [{ name: tool, arguments: { ms: CALL_MS } }] }, times: 1 },
      { match: { hasToolResults: true }, reply: { content: 'filed' } },
    );
    const respond = async (body: unknown) => {
      const response = await fetch(`http://127.0.0.1:${fixture.port}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      return { status: response.status, body: (await response.json()) as { id: string; output_text?: string; output: Array<{ type: string; id: string }>; error?: { message: string } } };
    };
    const asked = await respond({ input: 'file it' });
    const request = asked.body.output.find((item) => item.type === 'mcp_approval_request')!;
    const approval = { previous_response_id: asked.body.id, input: [{ type: 'mcp_approval_response', approval_request_id: request.id, approve: true }] };
    const writes = written('once').length;
    const approving = respond(approval).catch(() => undefined);
    await waitFor(() => written('once').length === writes + 1, 'the approved call to start', 20_000);
    await fixture.killAndRestart();
    await approving;
    const retried = await respond(approval);
    expect(retried.status, retried.body.error?.message).to.equal(200);
    expect(retried.body.output.some((item) => item.type === 'message')).to.equal(true);
    expect(written('once').length, 'the call started once').to.equal(writes + 1);
  });

  it('carries out an approval a background response decided, taken over by the next start: the call not run twice, the response completed', async () => {
    const tool = 'once__slow-write';
    fixture.llm.script(
      { match: { lastUserIncludes: 'send it', hasToolResults: false }, reply: { toolCalls: [{ name: tool, arguments: { ms: CALL_MS } }] }, times: 1 },
      { match: { hasToolResults: true }, reply: { content: 'sent' } },
    );
    const post = async (body: unknown) => {
      const response = await fetch(`http://127.0.0.1:${fixture.port}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      return (await response.json()) as { id: string; status: string; output_text?: string; output: Array<{ type: string; id: string; error?: unknown }> };
    };
    const asked = await post({ input: 'send it' });
    const request = asked.output.find((item) => item.type === 'mcp_approval_request')!;
    const writes = written('once').length;
    const approving = await post({ previous_response_id: asked.id, background: true, input: [{ type: 'mcp_approval_response', approval_request_id: request.id, approve: true }] });
    await waitFor(() => written('once').length === writes + 1, 'the approved call to start', 20_000);
    await fixture.killAndRestart();
    const completed = await waitFor(async () => {
      const response = await fetch(`http://127.0.0.1:${fixture.port}/v1/responses/${approving.id}`);
      const body = (await response.json()) as { status: string; output: Array<{ type: string; error?: { content: Array<{ text: string }> } | null }> };
      return body.status === 'completed' ? body : undefined;
    }, 'the taken-over response to complete', 30_000);
    expect(written('once').length, 'the call started once').to.equal(writes + 1);
    const call = completed.output.find((item) => item.type === 'mcp_call')!;
    expect(call.error!.content[0]!.text).to.match(/outcome of this call of slow-write \(server once\) is unknown/);
    expect(completed.output.some((item) => item.type === 'message')).to.equal(true);
  });

  it('runs a call whose server is idempotent again, with the same idempotency key, and the turn ends as it would have', async () => {
    const writes = written('again').length;
    const { sessionId, retried } = await killDuringApprovedCall('again');
    expect(retried).to.include({ status: 200, content: 'all done' });
    const keys = written('again').slice(writes);
    expect(keys, 'the call ran twice').to.have.length(2);
    expect(keys[1]).to.equal(keys[0]);
    const stored = await transcript(sessionId);
    expect(stored.filter((row) => row === 'user: yes')).to.have.length(1);
    const results = stored.filter((row) => row.startsWith('tool: '));
    expect(results).to.have.length(1);
    expect(results[0]).to.include('written');
  });
});
