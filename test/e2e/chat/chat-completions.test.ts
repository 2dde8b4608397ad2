import { expect } from 'chai';
import { expectSchema } from '../../support/openai-schema.js';
import { readText, sseData, startTestService, type TestService } from '../../support/service-harness.js';

const CHUNK_ID = /^chatcmpl-[0-9a-f]{8}$/;

async function postChat(harness: TestService, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${harness.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

describe('POST /v1/chat/completions', () => {
  let harness: TestService;

  before(async () => {
    harness = await startTestService({ env: { SYSTEM_PROMPT: 'You are the test agent.' } });
  });
  after(async () => harness?.close());
  beforeEach(() => harness.llm.reset());

  describe('non-streaming', () => {
    it('answers the openai client with the agent reply when stream is off', async () => {
      const completion = await harness.client.chat.completions.create({
        model: 'svc-default',
        messages: [{ role: 'user', content: 'hello there' }],
      });
      expectSchema('CreateChatCompletionResponse', completion);
      expect(completion.id).to.match(/^chatcmpl-/);
      expect(completion.object).to.equal('chat.completion');
      expect(completion.model).to.equal('svc-default');
      expect(completion.created).to.be.closeTo(Date.now() / 1000, 60);
      expect(completion.choices).to.have.length(1);
      expect(completion.choices[0]!.index).to.equal(0);
      expect(completion.choices[0]!.message).to.deep.include({ role: 'assistant', content: 'Echo: hello there' });
      expect(completion.choices[0]!.finish_reason).to.equal('stop');
      expect(completion.usage?.total_tokens).to.be.a('number').greaterThan(0);
    });

    it('sends the answer as UTF-8 JSON whose Content-Length counts bytes, not characters', async () => {
      const response = await postChat(harness, { messages: [{ role: 'user', content: 'Grüße aus 東京 😀' }] });
      expect(response.headers.get('content-type')).to.equal('application/json; charset=utf-8');
      const bytes = Buffer.from(await response.arrayBuffer());
      expect(Number(response.headers.get('content-length'))).to.equal(bytes.length);
      const body = JSON.parse(bytes.toString('utf8')) as { choices: Array<{ message: { content: string } }> };
      expect(body.choices[0]!.message.content).to.equal('Echo: Grüße aus 東京 😀');
    });

    it('defaults the model to svc-agent when the request names none', async () => {
      const response = await postChat(harness, { messages: [{ role: 'user', content: 'hi' }] });
      expect(response.status).to.equal(200);
      expect(response.headers.get('content-type')).to.match(/^application\/json/);
      const body = (await response.json()) as { model: string };
      expect(body.model).to.equal('svc-agent');
    });

    it('puts the system prompt first and only system, user and assistant turns into the context', async () => {
      await harness.client.chat.completions.create({
        model: 'svc-agent',
        messages: [
          { role: 'system', content: 'client rules' },
          { role: 'user', content: 'first' },
          { role: 'assistant', content: 'Echo: first' },
          { role: 'tool', content: 'stray tool output', tool_call_id: 'call_1' },
          { role: 'user', content: 'second' },
        ],
      });
      const sent = harness.llm.requests.at(-1)!.body.messages!;
      expect(sent.map((message) => message.role)).to.deep.equal(['system', 'system', 'user', 'assistant', 'user']);
      expect(sent[0]!.content).to.equal('You are the test agent.');
      expect(sent[1]!.content).to.equal('client rules');
    });

    it('passes temperature and max_tokens to the LLM, and the configured defaults otherwise', async () => {
      await harness.client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: 'a' }], temperature: 1.5, max_tokens: 42 });
      expect(harness.llm.requests.at(-1)!.body).to.include({ temperature: 1.5, max_tokens: 42 });
      await harness.client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: 'b' }] });
      expect(harness.llm.requests.at(-1)!.body).to.include({ temperature: 0.7, max_tokens: 1024 });
    });

    it('returns the session id in X-Session-ID', async () => {
      const response = await postChat(harness, { messages: [{ role: 'user', content: 'hi' }] });
      expect(response.headers.get('x-session-id')).to.be.a('string').with.length.greaterThan(0);
    });
  });

  describe('streaming', () => {
    it('streams pieces to the openai client with one id, the role first and finish_reason last', async () => {
      harness.llm.script({ reply: { content: 'one two three', pieces: ['one', ' two', ' three'] } });
      const stream = await harness.client.chat.completions.create({
        model: 'svc-agent',
        messages: [{ role: 'user', content: 'count' }],
        stream: true,
      });
      const chunks = [];
      for await (const chunk of stream) chunks.push(chunk);
      for (const chunk of chunks) expectSchema('CreateChatCompletionStreamResponse', chunk);
      const ids = new Set(chunks.map((chunk) => chunk.id));
      expect(ids.size).to.equal(1);
      expect([...ids][0]).to.match(CHUNK_ID);
      expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk' && chunk.model === 'svc-agent')).to.equal(true);
      expect(chunks[0]!.choices[0]!.delta.role).to.equal('assistant');
      const pieces = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').filter((piece) => piece !== '');
      expect(pieces).to.deep.equal(['one', ' two', ' three']);
      const last = chunks.at(-1)!;
      expect(last.choices[0]!.finish_reason).to.equal('stop');
      expect(last.choices[0]!.delta).to.deep.equal({});
      expect(chunks.slice(0, -1).every((chunk) => chunk.choices[0]!.finish_reason === null)).to.equal(true);
    });

    it('writes the exact SSE wire format ending with data: [DONE]', async () => {
      harness.llm.script({ reply: { content: 'ab', pieces: ['a', 'b'] } });
      const response = await postChat(harness, { messages: [{ role: 'user', content: 'x' }], stream: true });
      expect(response.headers.get('content-type')).to.match(/^text\/event-stream/);
      expect(response.headers.get('x-session-id')).to.be.a('string');
      const body = await readText(response);
      expect(body).to.match(/^(data: [^\n]+\n\n)+$/);
      expect(body.endsWith('data: [DONE]\n\n')).to.equal(true);
      const events = sseData(body);
      const chunks = events.slice(0, -1).map((event) => JSON.parse(event));
      expect(chunks.map((chunk) => chunk.choices[0].delta)).to.deep.equal([
        { role: 'assistant', content: '' },
        { content: 'a' },
        { content: 'b' },
        {},
      ]);
    });

    it('sends a usage chunk before [DONE] when stream_options.include_usage is set', async () => {
      const response = await postChat(harness, { messages: [{ role: 'user', content: 'x' }], stream: true, stream_options: { include_usage: true } });
      const events = sseData(await readText(response));
      const usageChunk = JSON.parse(events.at(-2)!);
      for (const event of events.slice(0, -1)) expectSchema('CreateChatCompletionStreamResponse', JSON.parse(event));
      expect(usageChunk.choices).to.deep.equal([]);
      expect(usageChunk.usage.total_tokens).to.be.greaterThan(0);
    });

    it('sends each piece as it arrives, not at the end', async () => {
      harness.llm.script({ reply: { content: 'slow reply', pieces: ['slow', ' reply'], pieceDelayMs: 400 } });
      const response = await postChat(harness, { messages: [{ role: 'user', content: 'x' }], stream: true });
      const reader = response.body!.getReader();
      let text = '';
      while (!text.includes('"slow"')) text += new TextDecoder().decode((await reader.read()).value);
      // The first piece is here while the LLM is still pausing before the second.
      expect(harness.llm.requests.at(-1)!.finished).to.equal(false);
      await reader.cancel();
    });
  });

  describe('identity', () => {
    it('takes X-User-ID before the user_id field', async () => {
      const first = await postChat(harness, { messages: [{ role: 'user', content: 'mine' }] }, { 'X-User-ID': 'alice' });
      const sessionId = first.headers.get('x-session-id')!;
      const asAlice = await postChat(harness, { user_id: 'bob', session_id: sessionId, messages: [{ role: 'user', content: 'again' }] }, { 'X-User-ID': 'alice' });
      expect(asAlice.status).to.equal(200);
      const asBob = await postChat(harness, { user_id: 'bob', session_id: sessionId, messages: [{ role: 'user', content: 'again' }] });
      // Another user's session answers as one that does not exist, so ids are not confirmed.
      expect(asBob.status).to.equal(404);
      expect(((await asBob.json()) as { error: { code: string; param: string } }).error).to.include({ code: 'not_found', param: 'session_id' });
    });
  });

  describe('bad input', () => {
    async function expectError(response: Response, status: number, param: string | null) {
      expect(response.status).to.equal(status);
      const body = (await response.json()) as { error: Record<string, unknown> };
      expectSchema('ErrorResponse', body);
      expect(body.error).to.have.keys(['message', 'type', 'param', 'code']);
      expect(body.error.message).to.be.a('string').that.is.not.empty;
      expect(body.error.param).to.equal(param);
      return body.error;
    }

    it('answers 400 to malformed JSON', async () => {
      const error = await expectError(await postChat(harness, '{"messages": ['), 400, null);
      expect(error.type).to.equal('invalid_request_error');
    });

    it('answers 400 naming the parameter for wrong types and out-of-range values', async () => {
      await expectError(await postChat(harness, { messages: 'hello' }), 400, 'messages');
      await expectError(await postChat(harness, { messages: [{ role: 'wizard', content: 'x' }] }), 400, 'messages[0].role');
      await expectError(await postChat(harness, { messages: [{ role: 'user', content: 'x' }], temperature: 2.5 }), 400, 'temperature');
      await expectError(await postChat(harness, { messages: [{ role: 'user', content: 'x' }], max_tokens: -3 }), 400, 'max_tokens');
      await expectError(await postChat(harness, { messages: [{ role: 'user', content: 'x' }], stream: 'yes' }), 400, 'stream');
      await expectError(await postChat(harness, [1, 2]), 400, null);
    });

    it('answers 400 when there is no user message to answer', async () => {
      await expectError(await postChat(harness, {}), 400, 'messages');
      await expectError(await postChat(harness, { messages: [{ role: 'assistant', content: 'x' }] }), 400, 'messages');
    });

    it('answers 400 to a user or session id longer than 255 characters', async () => {
      const long = 'u'.repeat(256);
      await expectError(await postChat(harness, { messages: [{ role: 'user', content: 'x' }] }, { 'X-User-ID': long }), 400, 'user_id');
      await expectError(await postChat(harness, { user_id: long, messages: [{ role: 'user', content: 'x' }] }), 400, 'user_id');
      await expectError(await postChat(harness, { session_id: long, messages: [{ role: 'user', content: 'x' }] }), 400, 'session_id');
    });

    it('answers 400 to NUL characters, which the database cannot store', async () => {
      await expectError(await postChat(harness, { messages: [{ role: 'user', content: 'a\u0000b' }] }), 400, 'messages[0].content');
      await expectError(await postChat(harness, { messages: [{ role: 'user', content: 'x' }] }, { 'X-User-ID': 'a\u0000b' }).catch(() => postChat(harness, { user_id: 'a\u0000b', messages: [{ role: 'user', content: 'x' }] })), 400, 'user_id');
    });

    it('answers 413 to a body over the limit', async () => {
      const huge = 'x'.repeat(1_100_000);
      const error = await expectError(await postChat(harness, { messages: [{ role: 'user', content: huge }] }), 413, null);
      expect(error.type).to.equal('invalid_request_error');
    });

    it('answers 404 JSON to unknown routes', async () => {
      const response = await fetch(`${harness.baseURL}/nowhere`);
      await expectError(response, 404, null);
    });
  });

  describe('LLM failures', () => {
    it('returns the specification error text as content when the LLM fails, not streaming', async () => {
      harness.llm.script({ reply: { error: { status: 503, message: 'model overloaded' } } });
      const completion = await harness.client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: 'x' }] });
      expectSchema('CreateChatCompletionResponse', completion);
      const content = completion.choices[0]!.message.content!;
      expect(content.startsWith('Error: An error occurred during async LLM call: ')).to.equal(true);
      expect(content).to.include('503');
    });

    it('streams one Error piece and ends the stream when the LLM fails', async () => {
      harness.llm.script({ reply: { error: { status: 500, message: 'boom' } } });
      const body = await readText(await postChat(harness, { messages: [{ role: 'user', content: 'x' }], stream: true }));
      const events = sseData(body);
      expect(events.at(-1)).to.equal('[DONE]');
      for (const event of events.slice(0, -1)) expectSchema('CreateChatCompletionStreamResponse', JSON.parse(event));
      const pieces = events.slice(0, -1).map((event) => JSON.parse(event).choices[0].delta.content).filter(Boolean);
      expect(pieces).to.have.length(1);
      expect(pieces[0]).to.match(/^Error: An error occurred during async LLM call: 500/);
    });

    it('reports the cut when the LLM stream breaks midway', async () => {
      harness.llm.script({ reply: { content: 'abcdef', pieces: ['ab', 'cd', 'ef'], cutAfterPieces: 1 } });
      const events = sseData(await readText(await postChat(harness, { messages: [{ role: 'user', content: 'x' }], stream: true })));
      const pieces = events.slice(0, -1).map((event) => JSON.parse(event).choices[0].delta.content).filter(Boolean);
      expect(pieces[0]).to.equal('ab');
      expect(pieces.at(-1)).to.match(/^Error: /);
      expect(events.at(-1)).to.equal('[DONE]');
    });

    for (const stream of [true, false]) {
      it(`cancels the upstream request within a second when the client disconnects (stream ${stream})`, async () => {
        harness.llm.script({ reply: { hang: true } });
        const controller = new AbortController();
        const request = fetch(`${harness.baseURL}/chat/completions`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ messages: [{ role: 'user', content: 'wait' }], stream }),
          signal: controller.signal,
        }).catch((error: Error) => error);
        const upstream = await harness.llm.waitForRequest((candidate) => candidate.kind === 'chat');
        controller.abort();
        const aborted = await harness.llm.waitForAbort((candidate) => candidate.seq === upstream.seq, 1000);
        expect(aborted.aborted).to.equal(true);
        await request;
      });
    }
  });
});
