import { expect } from 'chai';
import OpenAI from 'openai';
import type { CallEntry } from '../../../gateway/agents/call-format.js';
import type { AgentResource, LogPage } from '../../../gateway/agents/agents-routes.js';
import type { RuntimeEvents } from '../../../runtime/observability/event-bus.js';
import { useEverythingService } from '../../support/everything-service.js';
import { parsePrometheusText, sampleValue } from '../../support/prometheus-text.js';
import { readText, sseData, startTestService, type TestService } from '../../support/service-harness.js';
import { serviceStorageTargets } from '../../support/service-storage.js';

const KEYS = { API_KEYS: 'admin-key,alice-key:alice,bob-key:bob' };
const ALICE = { Authorization: 'Bearer alice-key' };
const ECHO_REQUEST = 'say it back [[tool:everything__echo {"message":"hi there"}]]';

type RecordedBody = { messages: Array<{ role: string; content?: unknown }>; tools?: Array<{ function: { name: string } }> };

async function getJson<T>(harness: TestService, path: string, headers: Record<string, string> = ALICE): Promise<{ status: number; body: T }> {
  const response = await fetch(`${harness.baseURL}${path}`, { headers });
  return { status: response.status, body: (await response.json()) as T };
}

function aliceClient(harness: TestService): OpenAI {
  return new OpenAI({ baseURL: harness.baseURL, apiKey: 'alice-key', maxRetries: 0 });
}

/** One chat turn of alice's; its session. */
async function aliceSays(harness: TestService, content: string, sessionId?: string): Promise<string> {
  const { response } = await aliceClient(harness)
    .chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content }] }, sessionId ? { headers: { 'X-Session-ID': sessionId } } : {})
    .withResponse();
  return response.headers.get('x-session-id')!;
}

async function tokenCounters(harness: TestService, model: string): Promise<{ prompt: number; completion: number }> {
  const response = await fetch(`${harness.service.url}/metrics`, { headers: { Authorization: 'Bearer admin-key' } });
  expect(response.status).to.equal(200);
  const samples = parsePrometheusText(await response.text());
  return {
    prompt: sampleValue(samples, 'llm_tokens_total', { model, kind: 'prompt' }) ?? 0,
    completion: sampleValue(samples, 'llm_tokens_total', { model, kind: 'completion' }) ?? 0,
  };
}

describe('/v1/agents/{id}/calls and token counts', () => {
  const service = useEverythingService({ env: KEYS });
  let harness: TestService;
  before(() => {
    harness = service.harness;
  });

  it("names in each call the request id of the HTTP request it ran for, the one the response and the log lines carry", async () => {
    const { response } = await aliceClient(harness).chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: ECHO_REQUEST }] }).withResponse();
    const requestId = response.headers.get('x-request-id');
    expect(requestId).to.be.a('string').and.not.equal('');
    const { body } = await getJson<LogPage<CallEntry>>(harness, `/agents/${response.headers.get('x-session-id')}/calls`);
    expect(body.data.map((call) => call.request_id)).to.deep.equal([requestId, requestId, requestId]);
  });

  it('lists a turn\'s LLM calls with the exact messages and tools sent, and its tool call with its result and duration', async () => {
    const sessionId = await aliceSays(harness, ECHO_REQUEST);
    const sent = harness.llm.requests.filter((request) => request.kind === 'chat').map((request) => request.body as RecordedBody);
    expect(sent).to.have.length(2);

    const { status, body } = await getJson<LogPage<CallEntry>>(harness, `/agents/${sessionId}/calls`);
    expect(status).to.equal(200);
    expect(body.data.map((call) => `${call.type}:${call.state}:${call.outcome}`)).to.deep.equal(['llm:agent_reply:ok', 'tool:use_tool:ok', 'llm:agent_reply:ok']);
    const [first, tool, second] = body.data as [Extract<CallEntry, { type: 'llm' }>, Extract<CallEntry, { type: 'tool' }>, Extract<CallEntry, { type: 'llm' }>];
    expect(new Set(body.data.map((call) => call.turn_id)).size).to.equal(1);

    // Exactly what the LLM server received: the first system message and the offered tools.
    expect(first.messages[0]).to.deep.equal(sent[0]!.messages[0]);
    expect(first.messages).to.deep.equal(sent[0]!.messages);
    expect(first.tools).to.deep.equal(sent[0]!.tools!.map((offered) => offered.function.name));
    expect(first.tools).to.include('everything__echo');
    expect(first).to.include({ finish_reason: 'tool_calls', error: null });
    expect(second.messages).to.deep.equal(sent[1]!.messages);

    expect(tool).to.include({ name: 'everything__echo', server: 'everything', tool: 'echo', result: 'Echo: hi there', error: null });
    expect(JSON.parse(tool.arguments)).to.deep.equal({ message: 'hi there' });
    expect(tool.duration_ms).to.be.a('number').and.be.at.least(0);
    expect(Date.parse(tool.started_at)).to.be.at.least(Date.parse(first.started_at));
  });

  it('pages the calls with limit and after, and hides them from another user\'s key and from no key', async () => {
    const sessionId = await aliceSays(harness, ECHO_REQUEST);
    const first = await getJson<LogPage<CallEntry>>(harness, `/agents/${sessionId}/calls?limit=2`);
    expect(first.body.data).to.have.length(2);
    expect(first.body.has_more).to.equal(true);
    const rest = await getJson<LogPage<CallEntry>>(harness, `/agents/${sessionId}/calls?after=${first.body.next_after}`);
    expect(rest.body.data.map((call) => call.type)).to.deep.equal(['llm']);
    expect(rest.body.has_more).to.equal(false);

    expect((await getJson(harness, `/agents/${sessionId}/calls`, { Authorization: 'Bearer bob-key' })).status).to.equal(404);
    expect((await getJson(harness, `/agents/${sessionId}/calls`, {})).status).to.equal(401);
    expect((await getJson(harness, `/agents/${sessionId}/calls?after=x`)).status).to.equal(400);
  });

  it('records a failed LLM call with its error, and the turn\'s transition to the user state', async () => {
    const sessionId = await aliceSays(harness, 'break [[error:503 the model is overloaded]]');
    const { body } = await getJson<LogPage<CallEntry>>(harness, `/agents/${sessionId}/calls`);
    expect(body.data).to.have.length(1);
    expect(body.data[0]).to.include({ type: 'llm', outcome: 'error' });
    expect(body.data[0]!.error).to.match(/503.*the model is overloaded/);
  });

  it('counts the tokens the LLM reports, streamed or not: /metrics, the agent, GET /v1/usage and turn:completed', async () => {
    const completed: Array<RuntimeEvents['turn:completed']> = [];
    const detach = harness.service.events.on('turn:completed', (event) => completed.push(event));
    harness.llm.script(
      { match: { lastUserIncludes: 'count me', hasToolResults: false }, reply: { toolCalls: [{ name: 'everything__echo', arguments: { message: 'x' } }], usage: { prompt_tokens: 50, completion_tokens: 5 } } },
      { match: { lastUserIncludes: 'count me', hasToolResults: true }, reply: { content: 'done', usage: { prompt_tokens: 120, completion_tokens: 9 } } },
      { match: { lastUserIncludes: 'stream me' }, reply: { content: 'streamed', usage: { prompt_tokens: 30, completion_tokens: 2 } } },
    );
    const usageBefore = (await getJson<{ prompt_tokens: number; completion_tokens: number }>(harness, '/usage')).body;
    const sessionId = await aliceSays(harness, 'count me');
    const model = (await getJson<LogPage<CallEntry>>(harness, `/agents/${sessionId}/calls`)).body.data.find((call) => call.type === 'llm')!;
    const modelName = (model as Extract<CallEntry, { type: 'llm' }>).model;
    const before = await tokenCounters(harness, modelName);

    const response = await fetch(`${harness.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { ...ALICE, 'Content-Type': 'application/json', 'X-Session-ID': sessionId },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'stream me' }], stream: true }),
    });
    expect(sseData(await readText(response)).at(-1)).to.equal('[DONE]');
    // The service asked for usage upstream, whether or not its own client did.
    const streamedCall = harness.llm.requests.at(-1)!.body as { stream_options?: { include_usage?: boolean } };
    expect(streamedCall.stream_options).to.deep.equal({ include_usage: true });
    const after = await tokenCounters(harness, modelName);
    expect([after.prompt - before.prompt, after.completion - before.completion]).to.deep.equal([30, 2]);

    const agent = (await getJson<AgentResource>(harness, `/agents/${sessionId}`)).body;
    expect(agent.usage).to.deep.equal({
      prompt_tokens: 200,
      completion_tokens: 16,
      total_tokens: 216,
      by_model: { [modelName]: { prompt_tokens: 200, completion_tokens: 16, total_tokens: 216 } },
    });
    const usage = (await getJson<{ user_id: string; prompt_tokens: number; completion_tokens: number; by_model: unknown[] }>(harness, '/usage')).body;
    expect(usage.user_id).to.equal('alice');
    expect([usage.prompt_tokens - usageBefore.prompt_tokens, usage.completion_tokens - usageBefore.completion_tokens]).to.deep.equal([200, 16]);
    expect(completed.filter((event) => event.sessionId === sessionId).map((event) => event.usage)).to.deep.equal([
      { prompt_tokens: 170, completion_tokens: 14, total_tokens: 184 },
      { prompt_tokens: 30, completion_tokens: 2, total_tokens: 32 },
    ]);
    detach();
  });

  it('answers GET /v1/usage for the key\'s own user only: another user_id is 403, an admin key may name any', async () => {
    const own = await getJson<{ user_id: string }>(harness, '/usage?user_id=alice');
    expect(own).to.deep.include({ status: 200 });
    expect(own.body.user_id).to.equal('alice');
    const other = await getJson<{ error: { param: string } }>(harness, '/usage?user_id=bob');
    expect(other.status).to.equal(403);
    expect(other.body.error.param).to.equal('user_id');
    const admin = await getJson<{ user_id: string; sessions: number; total_tokens: number }>(harness, '/usage?user_id=nobody', { Authorization: 'Bearer admin-key' });
    expect(admin.body).to.deep.include({ user_id: 'nobody', sessions: 0, total_tokens: 0 });
  });
});

for (const target of serviceStorageTargets()) {
  describe(`stored calls (inspect.store_calls, ${target.name})`, () => {
    let harness: TestService;
    let cleanup: () => Promise<void>;
    let env: NodeJS.ProcessEnv;

    before(async () => {
      const prepared = await target.prepare();
      cleanup = prepared.cleanup;
      env = { ...prepared.env, ...KEYS, INSPECT_STORE_CALLS: 'true' };
      harness = await startTestService({ env });
    });
    after(async () => {
      await harness?.close();
      await cleanup?.();
    });

    it('keeps every call in the database across a restart, and deletes them with the agent', async () => {
      const sessionId = await aliceSays(harness, 'remember this call');
      const stored = async () => (await getJson<LogPage<CallEntry>>(harness, `/agents/${sessionId}/calls`)).body.data;
      // Stored before the turn is announced, so before its answer.
      const [call, ...more] = await stored();
      expect(more).to.deep.equal([]);
      expect(call).to.include({ type: 'llm', outcome: 'ok', state: 'agent_reply' });
      expect((call as Extract<CallEntry, { type: 'llm' }>).messages.at(-1)).to.deep.equal({ role: 'user', content: 'remember this call' });

      await harness.close();
      harness = await startTestService({ env });
      expect((await stored()).map((entry) => entry.turn_id)).to.deep.equal([call!.turn_id]);

      const deleted = await fetch(`${harness.baseURL}/agents/${sessionId}`, { method: 'DELETE', headers: ALICE });
      expect(deleted.status).to.equal(200);
      const rows = await harness.service.database.db.selectFrom('session_calls').select('id').where('session_id', '=', sessionId).execute();
      expect(rows).to.deep.equal([]);
    });
  });
}
