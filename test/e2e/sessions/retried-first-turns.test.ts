import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import OpenAI from 'openai';
import { startTestService, type TestService } from '../../support/service-harness.js';

const ADMIN_KEY = 'admin-key';

/** The ids of a user's agents (sessions), as `GET /v1/agents` lists them. */
async function sessionsOf(harness: TestService, userId: string): Promise<string[]> {
  const response = await fetch(`${harness.baseURL}/agents?user_id=${userId}`, { headers: { Authorization: `Bearer ${ADMIN_KEY}` } });
  expect(response.status).to.equal(200);
  return ((await response.json()) as { data: Array<{ id: string }> }).data.map((agent) => agent.id);
}

/** A session's transcript, as `GET /v1/agents/{id}/messages` gives it. */
async function transcriptOf(harness: TestService, sessionId: string): Promise<Array<{ role: string; content: string }>> {
  const response = await fetch(`${harness.baseURL}/agents/${sessionId}/messages`, { headers: { Authorization: `Bearer ${ADMIN_KEY}` } });
  expect(response.status).to.equal(200);
  return ((await response.json()) as { data: Array<{ role: string; content: string }> }).data.map(({ role, content }) => ({ role, content }));
}

describe('a first turn the openai SDK retries (X-Stainless-Retry-Count), naming no session', function () {
  this.timeout(30_000);
  let harness: TestService;

  before(async () => {
    harness = await startTestService({ env: { API_KEYS: ADMIN_KEY } });
  });
  after(async () => harness?.close());
  beforeEach(() => harness.llm.reset());

  /** The openai client as an application sets it up: a time-out (long enough for a turn on a loaded machine, shorter than the slow first answer), and the SDK's own retries. */
  const impatientClient = () => new OpenAI({ baseURL: harness.baseURL, apiKey: ADMIN_KEY, timeout: 2_000, maxRetries: 2 });

  it('continues the session its timed-out attempt began: one session, the message stored once, answered', async () => {
    const userId = `user-${randomUUID()}`;
    // The first attempt's LLM call outlasts the client's time-out; the retry's is answered at once.
    harness.llm.script({ reply: { content: 'too late', delayMs: 6_000 }, times: 1 });
    const { data, response } = await impatientClient()
      .chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: 'book the table' }] }, { headers: { 'X-User-ID': userId } })
      .withResponse();
    expect(data.choices[0]!.message.content).to.equal('Echo: book the table');
    // The SDK did retry: the LLM server saw the first attempt go away.
    expect(harness.llm.requests.filter((request) => request.kind === 'chat')).to.have.length(2);
    expect(harness.llm.requests[0]!.aborted).to.equal(true);
    const sessionId = response.headers.get('x-session-id')!;
    expect(await sessionsOf(harness, userId)).to.deep.equal([sessionId]);
    expect(await transcriptOf(harness, sessionId)).to.deep.equal([
      { role: 'user', content: 'book the table' },
      { role: 'assistant', content: 'Echo: book the table' },
    ]);
  });

  it('does the same for the Responses API', async () => {
    const userId = `user-${randomUUID()}`;
    harness.llm.script({ reply: { content: 'too late', delayMs: 6_000 }, times: 1 });
    const { data, response } = await impatientClient()
      .responses.create({ input: 'order the flowers' }, { headers: { 'X-User-ID': userId } })
      .withResponse();
    expect(data.output_text).to.equal('Echo: order the flowers');
    const sessionId = response.headers.get('x-session-id')!;
    expect(await sessionsOf(harness, userId)).to.deep.equal([sessionId]);
    expect((await transcriptOf(harness, sessionId)).map((message) => message.role)).to.deep.equal(['user', 'assistant']);
  });

  it('starts a new session for the same first message sent again as a new request (no retry count): a user may say the same thing twice', async () => {
    const userId = `user-${randomUUID()}`;
    const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${ADMIN_KEY}`, 'X-User-ID': userId };
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'hello' }] });
    // A first attempt the client gives up on: its session is left unanswered.
    harness.llm.script({ reply: { hang: true }, times: 1 });
    const gone = new AbortController();
    const abandoned = fetch(`${harness.baseURL}/chat/completions`, { method: 'POST', headers, body, signal: gone.signal }).catch(() => undefined);
    await harness.llm.waitForRequest();
    gone.abort();
    await abandoned;
    await harness.llm.waitForAbort();
    const again = await fetch(`${harness.baseURL}/chat/completions`, { method: 'POST', headers: { ...headers, 'X-Stainless-Retry-Count': '0' }, body });
    expect(again.status).to.equal(200);
    const sessions = await sessionsOf(harness, userId);
    expect(sessions).to.have.length(2);
  });
});
