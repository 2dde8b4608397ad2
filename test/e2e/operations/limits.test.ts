import { expect } from 'chai';
import OpenAI from 'openai';
import type { RecordedRequest } from '../../../scripts/fake-llm-server.js';
import { expectSchema } from '../../support/openai-schema.js';
import { rejection } from '../../support/rejection.js';
import { startTestService, type TestService } from '../../support/service-harness.js';

type ErrorBody = { error: { message: string; type: string; param: string | null; code: string | null } };

/** Posts one chat request as `userId` with one user message; `extra` fields (even `messages`) override the body. */
function postChat(
  harness: TestService,
  userId: string,
  content: string,
  options: { sessionId?: string; stream?: boolean; signal?: AbortSignal; extra?: Record<string, unknown> } = {},
): Promise<Response> {
  const headers: Record<string, string> = { 'Content-Type': 'application/json', 'X-User-ID': userId };
  if (options.sessionId) headers['X-Session-ID'] = options.sessionId;
  const body = { messages: [{ role: 'user', content }], stream: options.stream ?? false, ...options.extra };
  return fetch(`${harness.baseURL}/chat/completions`, { method: 'POST', headers, body: JSON.stringify(body), signal: options.signal });
}

/** Checks a 429 in the OpenAI error shape with a numeric Retry-After; returns the error object. */
async function expectRateLimited(response: Response): Promise<ErrorBody['error']> {
  expect(response.status).to.equal(429);
  expect(response.headers.get('retry-after')).to.match(/^[1-9]\d*$/);
  expect(response.headers.get('content-type')).to.match(/^application\/json/);
  const body = (await response.json()) as ErrorBody;
  expectSchema('ErrorResponse', body);
  expect(body.error).to.have.keys(['message', 'type', 'param', 'code']);
  expect(body.error).to.include({ type: 'rate_limit_error', code: 'rate_limited', param: null });
  return body.error;
}

/** Sends `count` requests of `userId` one after the other and returns their statuses. */
async function statusesOf(harness: TestService, userId: string, count: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i += 1) {
    const response = await postChat(harness, userId, `turn ${i}`);
    await response.arrayBuffer();
    statuses.push(response.status);
  }
  return statuses;
}

function lastUserContent(request: RecordedRequest): string {
  return String(request.body.messages?.filter((message) => message.role === 'user').at(-1)?.content ?? '');
}

describe('per-user limits', () => {
  describe('requests per minute', () => {
    let harness: TestService;

    // One token a minute after a burst of 3: a test never sees a refill.
    before(async () => {
      harness = await startTestService({
        env: { LIMITS_REQUESTS_PER_MINUTE: '1', LIMITS_BURST: '3', LIMITS_CONCURRENT_REQUESTS: '0', APP_MAX_MESSAGES: '4' },
      });
    });
    after(async () => harness?.close());

    it('refuses the openai client past the burst with a RateLimitError carrying Retry-After', async () => {
      const create = () =>
        harness.client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'X-User-ID': 'sdk-user' } });
      for (let i = 0; i < 3; i += 1) await create();
      const error = await rejection(create());
      expect(error).to.be.instanceOf(OpenAI.RateLimitError);
      const refusal = error as InstanceType<typeof OpenAI.RateLimitError>;
      expect(refusal.status).to.equal(429);
      expect(refusal.type).to.equal('rate_limit_error');
      expect(refusal.code).to.equal('rate_limited');
      expect(Number(refusal.headers.get('retry-after'))).to.be.within(1, 60);
    });

    it('answers the request past the burst with 429 in the OpenAI error shape, naming the limit', async () => {
      expect(await statusesOf(harness, 'fetch-user', 3)).to.deep.equal([200, 200, 200]);
      const error = await expectRateLimited(await postChat(harness, 'fetch-user', 'one more'));
      expect(error.message).to.include('limits.requests_per_minute');
    });

    it('refuses a streaming request with a plain 429 before any event', async () => {
      await statusesOf(harness, 'stream-user', 3);
      await expectRateLimited(await postChat(harness, 'stream-user', 'one more', { stream: true }));
    });

    it('does not count one user against another', async () => {
      await statusesOf(harness, 'busy-user', 4);
      expect(await statusesOf(harness, 'quiet-user', 1)).to.deep.equal([200]);
    });

    it('stores nothing and asks the LLM nothing for a refused request', async () => {
      await statusesOf(harness, 'refused-user', 3);
      await expectRateLimited(await postChat(harness, 'refused-user', 'never accepted', { sessionId: 'refused-session' }));
      const rows = await harness.service.database.db.selectFrom('conversations').select('id').where('session_id', '=', 'refused-session').execute();
      expect(rows).to.deep.equal([]);
      expect(harness.llm.requests.filter((request) => lastUserContent(request) === 'never accepted')).to.deep.equal([]);
    });

    it('charges no token for a request refused as invalid', async () => {
      expect((await postChat(harness, 'careful-user', 'x', { extra: { temperature: 5 } })).status).to.equal(400);
      expect((await postChat(harness, 'careful-user', 'x', { extra: { n: 2 } })).status).to.equal(400);
      expect(await statusesOf(harness, 'careful-user', 3)).to.deep.equal([200, 200, 200]);
    });

    it('answers 400 in the OpenAI error shape to more messages than app.max_messages', async () => {
      const messages = Array.from({ length: 5 }, (_, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: `m${i}` }));
      const response = await postChat(harness, 'chatty-user', '', { extra: { messages } });
      expect(response.status).to.equal(400);
      const body = (await response.json()) as ErrorBody;
      expect(body.error).to.include({ type: 'invalid_request_error', code: 'invalid_request', param: 'messages' });
      expect(body.error.message).to.include('at most 4');
    });
  });

  describe('requests in flight', () => {
    let harness: TestService;
    const clients: AbortController[] = [];

    before(async () => {
      harness = await startTestService({ env: { LIMITS_REQUESTS_PER_MINUTE: '0', LIMITS_CONCURRENT_REQUESTS: '2' } });
    });
    after(async () => harness?.close());
    beforeEach(() => harness.llm.reset());
    afterEach(() => clients.splice(0).forEach((client) => client.abort()));

    /** Starts a request the LLM holds (`[[hang]]` until the client leaves, or `[[slow:MS]]`) and waits until the LLM has it. */
    async function holdRequest(userId: string, word: string): Promise<{ response: Promise<Response>; client: AbortController; upstream: RecordedRequest }> {
      const client = new AbortController();
      clients.push(client);
      const content = `${word} ${userId} ${clients.length}`;
      const response = postChat(harness, userId, content, { signal: client.signal });
      response.catch(() => undefined);
      const upstream = await harness.llm.waitForRequest((request) => lastUserContent(request) === content);
      return { response, client, upstream };
    }

    it('refuses a request past concurrent_requests and admits one again once the others finish', async () => {
      const first = await holdRequest('patient-user', '[[slow:2000]]');
      const second = await holdRequest('patient-user', '[[slow:2000]]');
      const error = await expectRateLimited(await postChat(harness, 'patient-user', 'third'));
      expect(error.message).to.include('limits.concurrent_requests');
      expect((await first.response).status).to.equal(200);
      expect((await second.response).status).to.equal(200);
      expect((await postChat(harness, 'patient-user', 'after')).status).to.equal(200);
    });

    it('frees the place of a client that disconnects', async () => {
      const leaving = await holdRequest('leaving-user', '[[hang]]');
      await holdRequest('leaving-user', '[[hang]]');
      await expectRateLimited(await postChat(harness, 'leaving-user', 'third'));
      leaving.client.abort();
      await harness.llm.waitForAbort((request) => request.seq === leaving.upstream.seq);
      expect((await postChat(harness, 'leaving-user', 'after')).status).to.equal(200);
    });

    it('does not count one user against another', async () => {
      await holdRequest('holding-user', '[[hang]]');
      await holdRequest('holding-user', '[[hang]]');
      await expectRateLimited(await postChat(harness, 'holding-user', 'third'));
      expect((await postChat(harness, 'other-user', 'hello')).status).to.equal(200);
    });
  });
});
