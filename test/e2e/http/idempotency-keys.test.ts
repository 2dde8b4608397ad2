import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { readText, sseData, startTestService, type TestService } from '../../support/service-harness.js';

type ErrorBody = { error: { message: string; type: string; param: string | null; code: string | null } };

function post(harness: TestService, path: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
  return fetch(`${harness.baseURL}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify(body),
    signal,
  });
}

/** The content a chat completions stream carried, its chunks' deltas joined. */
function streamedContent(body: string): string {
  return sseData(body)
    .filter((data) => data !== '[DONE]')
    .map((data) => (JSON.parse(data) as { choices: Array<{ delta: { content?: string } }> }).choices[0]?.delta.content ?? '')
    .join('');
}

/** The stored items of a session, oldest first, as the Conversations API lists them. */
async function storedItems(harness: TestService, sessionId: string, userId?: string): Promise<Array<{ role?: string; type: string }>> {
  const response = await fetch(`${harness.baseURL}/conversations/${sessionId}/items?order=asc`, { headers: userId ? { 'X-User-ID': userId } : {} });
  expect(response.status).to.equal(200);
  return ((await response.json()) as { data: Array<{ role?: string; type: string }> }).data;
}

const chatTurns = (harness: TestService) => harness.llm.requests.filter((request) => request.kind === 'chat').length;

describe('Idempotency-Key on chat completions and the Responses API', function () {
  this.timeout(30_000);
  let harness: TestService;

  before(async () => {
    harness = await startTestService();
  });
  after(async () => harness?.close());
  beforeEach(() => harness.llm.reset());

  it('gives a repeated request the first one’s answer, marked Idempotent-Replayed, without a second turn (the openai client)', async () => {
    const key = randomUUID();
    const body = { model: 'svc-agent', messages: [{ role: 'user' as const, content: 'pay the invoice' }] };
    const first = await harness.client.chat.completions.create(body, { headers: { 'Idempotency-Key': key } }).withResponse();
    const again = await harness.client.chat.completions.create(body, { headers: { 'Idempotency-Key': key } }).withResponse();
    expect(again.data).to.deep.equal(first.data);
    expect(first.response.headers.get('idempotent-replayed')).to.equal(null);
    expect(again.response.headers.get('idempotent-replayed')).to.equal('true');
    const sessionId = first.response.headers.get('x-session-id')!;
    expect(again.response.headers.get('x-session-id')).to.equal(sessionId);
    expect(chatTurns(harness)).to.equal(1);
    const items = await storedItems(harness, sessionId);
    expect(items.map((item) => item.role)).to.deep.equal(['user', 'assistant']);
  });

  it('refuses the key with another body: 422 idempotency_key_reused naming the header, and nothing runs', async () => {
    const key = randomUUID();
    expect((await post(harness, '/chat/completions', { messages: [{ role: 'user', content: 'one' }] }, { 'Idempotency-Key': key })).status).to.equal(200);
    const other = await post(harness, '/chat/completions', { messages: [{ role: 'user', content: 'two' }] }, { 'Idempotency-Key': key });
    expect(other.status).to.equal(422);
    const { error } = (await other.json()) as ErrorBody;
    expect(error).to.deep.include({ type: 'invalid_request_error', param: 'Idempotency-Key', code: 'idempotency_key_reused' });
    // The same key on the other endpoint is another request too.
    const elsewhere = await post(harness, '/responses', { input: 'one' }, { 'Idempotency-Key': key });
    expect(elsewhere.status).to.equal(422);
    expect(chatTurns(harness)).to.equal(1);
  });

  it('keeps each user’s keys apart', async () => {
    const key = randomUUID();
    const body = { messages: [{ role: 'user', content: 'same words' }] };
    const ada = await post(harness, '/chat/completions', body, { 'Idempotency-Key': key, 'X-User-ID': 'ada' });
    const bob = await post(harness, '/chat/completions', body, { 'Idempotency-Key': key, 'X-User-ID': 'bob' });
    expect(ada.status).to.equal(200);
    expect(bob.status).to.equal(200);
    expect(bob.headers.get('idempotent-replayed')).to.equal(null);
    expect(bob.headers.get('x-session-id')).not.to.equal(ada.headers.get('x-session-id'));
    expect(chatTurns(harness)).to.equal(2);
  });

  it('joins a stream still running from its start: both clients get the same whole stream from one turn', async () => {
    const key = randomUUID();
    const body = { stream: true, messages: [{ role: 'user', content: '[[pace:40]] a slow answer in several pieces' }] };
    const first = await post(harness, '/chat/completions', body, { 'Idempotency-Key': key });
    const firstText = readText(first);
    await harness.llm.waitForRequest();
    const second = await post(harness, '/chat/completions', body, { 'Idempotency-Key': key });
    expect(second.headers.get('idempotent-replayed')).to.equal('true');
    expect(second.headers.get('content-type')).to.match(/^text\/event-stream/);
    const [one, two] = await Promise.all([firstText, readText(second)]);
    expect(two).to.equal(one);
    expect(streamedContent(one)).to.equal('Echo: [[pace:40]] a slow answer in several pieces');
    expect(sseData(one).at(-1)).to.equal('[DONE]');
    expect(chatTurns(harness)).to.equal(1);
  });

  it('finishes the turn of a client that went away, and gives its retry the whole answer, stored once', async () => {
    const key = randomUUID();
    const body = { stream: true, messages: [{ role: 'user', content: '[[pace:40]] an answer worth waiting for' }] };
    const gone = new AbortController();
    const first = await post(harness, '/chat/completions', body, { 'Idempotency-Key': key }, gone.signal);
    const sessionId = first.headers.get('x-session-id')!;
    // The client reads the first piece, then goes away.
    await first.body!.getReader().read();
    gone.abort();
    const retry = await post(harness, '/chat/completions', body, { 'Idempotency-Key': key });
    const text = await readText(retry);
    expect(streamedContent(text)).to.equal('Echo: [[pace:40]] an answer worth waiting for');
    expect(sseData(text).at(-1)).to.equal('[DONE]');
    expect(retry.headers.get('x-session-id')).to.equal(sessionId);
    expect(harness.llm.requests).to.have.length(1);
    expect(harness.llm.requests[0]!.aborted).to.equal(false);
    const items = await storedItems(harness, sessionId);
    expect(items.map((item) => item.role)).to.deep.equal(['user', 'assistant']);
  });

  it('does not keep an answer the service failed to give (llm.failure_mode http): the retry runs again', async () => {
    const failing = await startTestService({ llm: harness.llm, env: { LLM_FAILURE_MODE: 'http', LLM_MAX_RETRIES: '0' } });
    try {
      const key = randomUUID();
      harness.llm.setBehaviour({ defaultReply: { error: { status: 400, message: 'the model is not loaded' } } });
      const body = { messages: [{ role: 'user', content: 'try me' }] };
      const failed = await post(failing, '/chat/completions', body, { 'Idempotency-Key': key });
      expect(failed.status).to.equal(502);
      harness.llm.setBehaviour({ defaultReply: null });
      const retry = await post(failing, '/chat/completions', body, { 'Idempotency-Key': key });
      expect(retry.status).to.equal(200);
      expect(retry.headers.get('idempotent-replayed')).to.equal(null);
      expect(((await retry.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content).to.equal('Echo: try me');
    } finally {
      await failing.close();
    }
  });

  it('gives the Responses API’s repeated request the same response, background ones included', async () => {
    const key = randomUUID();
    const first = await harness.client.responses.create({ input: 'remember the milk' }, { headers: { 'Idempotency-Key': key } });
    const again = await harness.client.responses.create({ input: 'remember the milk' }, { headers: { 'Idempotency-Key': key } });
    expect(again.id).to.equal(first.id);
    expect(again.output_text).to.equal('Echo: remember the milk');
    const backgroundKey = randomUUID();
    const queued = await harness.client.responses.create({ input: 'later', background: true }, { headers: { 'Idempotency-Key': backgroundKey } });
    const queuedAgain = await harness.client.responses.create({ input: 'later', background: true }, { headers: { 'Idempotency-Key': backgroundKey } });
    expect(queuedAgain.id).to.equal(queued.id);
    expect(chatTurns(harness)).to.equal(2);
  });

  it('refuses a key that is empty, too long or not printable ASCII: 400 naming the header', async () => {
    for (const key of ['', 'x'.repeat(256), 'tab\tinside', 'naïve']) {
      const response = await fetch(`${harness.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Idempotency-Key': Buffer.from(key, 'utf8').toString('latin1') },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(response.status, key).to.equal(400);
      expect(((await response.json()) as ErrorBody).error.param).to.equal('Idempotency-Key');
    }
    expect(chatTurns(harness)).to.equal(0);
  });
});
