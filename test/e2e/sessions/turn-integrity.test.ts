import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import OpenAI from 'openai';
import { FAILED_REPLY_ROLE, LLM_FAILURE_PREFIX } from '../../../runtime/sessions/supervisor.js';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { storedTranscript } from '../../fault/transcript.js';
import { expectSchema } from '../../support/openai-schema.js';
import { serviceStorageTargets } from '../../support/service-storage.js';
import { readText, sseData, startTestService, type TestService } from '../../support/service-harness.js';

const targets = serviceStorageTargets();

/** The texts of the messages the scripted LLM received in its last request. */
function lastContext(llm: FakeLlm): Array<{ role: string; content: string }> {
  const request = llm.requests.at(-1)!;
  return (request.body.messages ?? []).map((message) => ({ role: String(message.role), content: String(message.content ?? '') }));
}

for (const target of targets) {
  describe(`turns stored exactly once and as they happened (${target.name})`, function () {
    this.timeout(60_000);
    let llm: FakeLlm;
    let harness: TestService;
    let cleanup: () => Promise<void>;

    before(async () => {
      llm = await startFakeLlm();
      const prepared = await target.prepare();
      cleanup = prepared.cleanup;
      harness = await startTestService({ llm, env: prepared.env });
    });
    after(async () => {
      await harness?.close();
      await llm?.close();
      await cleanup?.();
    });

    it('stores the user message of a first turn once when the turn is sent again after its process died unanswered', async () => {
      const sessionId = `first-turn-${randomUUID()}`;
      const text = 'hello from a phone in a tunnel';
      // What a worker killed mid-stream leaves of a session's first turn: the row and the user's message, no reply, no hash.
      const stores = harness.service.database;
      await stores.db.insertInto('sessions').values({ session_id: sessionId, user_id: 'default_user' }).execute();
      await stores.db.insertInto('conversations').values({ session_id: sessionId, user_id: 'default_user', role: 'user', message: text }).execute();

      const completion = await harness.client.chat.completions.create(
        { model: 'svc-agent', messages: [{ role: 'user', content: text }] },
        { headers: { 'X-Session-ID': sessionId } },
      );
      expect(completion.choices[0]!.message.content).to.equal(`Echo: ${text}`);
      await harness.service.writer.flush();
      expect(await storedTranscript(stores, sessionId)).to.deep.equal([`user: ${text}`, `assistant: Echo: ${text}`]);
      // The context held the message once too.
      expect(lastContext(llm).filter((message) => message.content === text)).to.have.length(1);
    });

    it('still stores a first turn whose message was never stored (the row alone was claimed)', async () => {
      const sessionId = `claimed-only-${randomUUID()}`;
      await harness.service.database.db.insertInto('sessions').values({ session_id: sessionId, user_id: 'default_user' }).execute();
      const completion = await harness.client.chat.completions.create(
        { model: 'svc-agent', messages: [{ role: 'user', content: 'first words' }] },
        { headers: { 'X-Session-ID': sessionId } },
      );
      expect(completion.choices[0]!.message.content).to.equal('Echo: first words');
      await harness.service.writer.flush();
      expect(await storedTranscript(harness.service.database, sessionId)).to.deep.equal(['user: first words', 'assistant: Echo: first words']);
    });

    it('refuses a message holding a lone UTF-16 surrogate with a 400 naming it, and stores nothing', async () => {
      const sessionId = `surrogate-${randomUUID()}`;
      const response = await fetch(`${harness.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Session-ID': sessionId },
        // JSON.stringify writes the lone surrogate as the escape \ud800, as a client would send it.
        body: JSON.stringify({ messages: [{ role: 'user', content: 'broken \ud800 text' }] }),
      });
      expect(response.status).to.equal(400);
      const body = (await response.json()) as { error: { param: string; type: string; message: string } };
      expect(body.error).to.include({ param: 'messages[0].content', type: 'invalid_request_error' });
      expect(body.error.message).to.match(/lone UTF-16 surrogate/);
      const rows = await harness.service.database.db.selectFrom('sessions').select('session_id').where('session_id', '=', sessionId).execute();
      expect(rows).to.deep.equal([]);
      expect(await storedTranscript(harness.service.database, sessionId)).to.deep.equal([]);
    });

    it('accepts surrogate pairs (emoji) and stores them as sent', async () => {
      const sessionId = `emoji-${randomUUID()}`;
      const completion = await harness.client.chat.completions.create(
        { model: 'svc-agent', messages: [{ role: 'user', content: 'a smile 😀' }] },
        { headers: { 'X-Session-ID': sessionId } },
      );
      expect(completion.choices[0]!.message.content).to.equal('Echo: a smile 😀');
      await harness.service.writer.flush();
      expect(await storedTranscript(harness.service.database, sessionId)).to.deep.equal(['user: a smile 😀', 'assistant: Echo: a smile 😀']);
    });

    it("answers a failed LLM call with the specification's text, stores it marked and keeps it out of later contexts (session id)", async () => {
      const sessionId = `failed-${randomUUID()}`;
      const failing = 'what is the weather [[error:503 overloaded]]';
      const failed = await harness.client.chat.completions.create(
        { model: 'svc-agent', messages: [{ role: 'user', content: failing }] },
        { headers: { 'X-Session-ID': sessionId } },
      );
      expect(failed.choices[0]!.message.content).to.equal(`${LLM_FAILURE_PREFIX}503 overloaded`);

      const next = await harness.client.chat.completions.create(
        { model: 'svc-agent', messages: [{ role: 'user', content: 'are you back?' }] },
        { headers: { 'X-Session-ID': sessionId } },
      );
      expect(next.choices[0]!.message.content).to.equal('Echo: are you back?');
      const context = lastContext(llm);
      expect(context.map((message) => message.content).join('\n')).not.to.include(LLM_FAILURE_PREFIX);
      // The user's own words stay: only the failure's text is left out.
      expect(context.slice(1)).to.deep.equal([
        { role: 'user', content: failing },
        { role: 'user', content: 'are you back?' },
      ]);
      await harness.service.writer.flush();
      expect(await storedTranscript(harness.service.database, sessionId)).to.deep.equal([
        `user: ${failing}`,
        `${FAILED_REPLY_ROLE}: ${LLM_FAILURE_PREFIX}503 overloaded`,
        'user: are you back?',
        'assistant: Echo: are you back?',
      ]);
    });

    it('keeps a failed reply out of the context when the client resends the whole history, streamed or not', async () => {
      const failing = 'tell me a story [[error:502 bad gateway]]';
      const stream = await harness.client.chat.completions.create({ model: 'svc-agent', stream: true, messages: [{ role: 'user', content: failing }] });
      let streamed = '';
      for await (const chunk of stream) streamed += chunk.choices[0]?.delta.content ?? '';
      expect(streamed).to.equal(`${LLM_FAILURE_PREFIX}502 bad gateway`);

      const history: OpenAI.Chat.ChatCompletionMessageParam[] = [
        { role: 'user', content: failing },
        { role: 'assistant', content: streamed },
        { role: 'user', content: 'try again please' },
      ];
      const { data, response } = await harness.client.chat.completions.create({ model: 'svc-agent', messages: history }).withResponse();
      expect(data.choices[0]!.message.content).to.equal('Echo: try again please');
      expect(lastContext(llm).slice(1)).to.deep.equal([
        { role: 'user', content: failing },
        { role: 'user', content: 'try again please' },
      ]);
      // The resent history was recognised as the failed turn's session: no fork.
      await harness.service.writer.flush();
      const sessionId = response.headers.get('x-session-id')!;
      expect(await storedTranscript(harness.service.database, sessionId)).to.deep.equal([
        `user: ${failing}`,
        `${FAILED_REPLY_ROLE}: ${streamed}`,
        'user: try again please',
        'assistant: Echo: try again please',
      ]);
    });
  });
}

describe('llm.failure_mode: http', function () {
  this.timeout(60_000);
  let harness: TestService;

  before(async () => {
    harness = await startTestService({ env: { LLM_FAILURE_MODE: 'http' } });
  });
  after(async () => {
    await harness?.close();
  });

  it('answers a failed LLM call with a 502 in the OpenAI error shape, and a retry stores the message once', async () => {
    const sessionId = `http-mode-${randomUUID()}`;
    const failing = 'hello [[error:503 overloaded]]';
    const send = () =>
      fetch(`${harness.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Session-ID': sessionId },
        body: JSON.stringify({ messages: [{ role: 'user', content: failing }] }),
      });
    const first = await send();
    expect(first.status).to.equal(502);
    expect(first.headers.get('retry-after')).to.equal('1');
    const body = (await first.json()) as { error: Record<string, unknown> };
    expectSchema('ErrorResponse', body);
    expect(body.error).to.deep.equal({
      message: 'An error occurred during async LLM call: 503 overloaded',
      type: 'upstream_error',
      param: null,
      code: 'upstream_unavailable',
    });
    expect((await send()).status).to.equal(502);
    await harness.service.writer.flush();
    expect(await storedTranscript(harness.service.database, sessionId)).to.deep.equal([`user: ${failing}`]);
  });

  it('raises an APIError in the openai client (which retries 5xx by itself)', async () => {
    const client = new OpenAI({ baseURL: harness.baseURL, apiKey: 'placeholder', maxRetries: 0 });
    let failure: unknown;
    await client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: 'x [[error:500 boom]]' }] }).catch((error: unknown) => (failure = error));
    expect(failure).to.be.instanceOf(OpenAI.APIError);
    expect((failure as InstanceType<typeof OpenAI.APIError>).status).to.equal(502);
  });

  it('ends a stream whose LLM call fails with an error event and no error text as content', async () => {
    const response = await fetch(`${harness.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ stream: true, messages: [{ role: 'user', content: 'a long story [[cut:2]]' }] }),
    });
    expect(response.status).to.equal(200);
    const events = sseData(await readText(response));
    expect(events.at(-1)).to.equal('[DONE]');
    const last = JSON.parse(events.at(-2)!) as { error?: { type: string; message: string } };
    expectSchema('ErrorResponse', last);
    for (const event of events.slice(0, -2)) expectSchema('CreateChatCompletionStreamResponse', JSON.parse(event));
    expect(last.error?.type).to.equal('upstream_error');
    const contents = events.slice(0, -2).map((event) => (JSON.parse(event) as { choices: Array<{ delta: { content?: string } }> }).choices[0]?.delta.content ?? '');
    expect(contents.join('')).not.to.include('Error');
  });

  it('answers a stream whose LLM call fails before any text with a plain 502', async () => {
    const response = await fetch(`${harness.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ stream: true, messages: [{ role: 'user', content: 'x [[error:503 down]]' }] }),
    });
    expect(response.status).to.equal(502);
    const body = (await response.json()) as { error: { code: string } };
    expectSchema('ErrorResponse', body);
    expect(body.error.code).to.equal('upstream_unavailable');
  });
});
