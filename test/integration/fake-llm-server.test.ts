import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { APIConnectionError, APIError, APIUserAbortError, OpenAI } from 'openai';
import type { ChatCompletionChunk, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { FakeLlm, RecordedRequest } from '../../scripts/fake-llm-server.js';
import { startFakeLlm } from '../../scripts/fake-llm-server.js';
import { rejection } from '../support/rejection.js';

const projectRoot = fileURLToPath(new URL('../../', import.meta.url));

function user(content: string): ChatCompletionMessageParam {
  return { role: 'user', content };
}


/** The payloads of an SSE body, checking every frame is exactly `data: <payload>`. */
function ssePayloads(text: string): string[] {
  expect(text.endsWith('\n\n'), 'body ends with a blank line').to.equal(true);
  return text
    .slice(0, -2)
    .split('\n\n')
    .map((frame) => {
      expect(frame).to.match(/^data: [^\n]*$/);
      return frame.slice('data: '.length);
    });
}

function chunksOf(payloads: string[]): ChatCompletionChunk[] {
  return payloads.filter((payload) => payload !== '[DONE]').map((payload) => JSON.parse(payload) as ChatCompletionChunk);
}

function cosine(a: number[], b: number[]): number {
  return a.reduce((sum, value, index) => sum + value * (b[index] ?? 0), 0);
}

function norm(vector: number[]): number {
  return Math.sqrt(cosine(vector, vector));
}

/** Reads a streamed body, noting when each network chunk arrived (ms since `start`). */
async function timedChunks(response: Response, start: number): Promise<Array<{ at: number; text: string }>> {
  const decoder = new TextDecoder();
  const chunks: Array<{ at: number; text: string }> = [];
  for await (const bytes of response.body as unknown as AsyncIterable<Uint8Array>) {
    chunks.push({ at: performance.now() - start, text: decoder.decode(bytes, { stream: true }) });
  }
  return chunks;
}

describe('startFakeLlm', () => {
  let fake: FakeLlm;
  let client: OpenAI;

  function postJson(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
    return fetch(`${fake.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  }

  before(async () => {
    fake = await startFakeLlm();
    client = new OpenAI({ baseURL: fake.url, apiKey: 'x', maxRetries: 0 });
  });

  afterEach(() => fake.reset());

  after(() => fake.close());

  describe('GET /v1/models', () => {
    it('lists the configured model in the OpenAI list shape when asked', async () => {
      fake.setBehaviour({ model: 'tiny-model' });
      const response = await fetch(`${fake.url}/models`);
      const body = (await response.json()) as { object: string; data: Array<Record<string, unknown>> };
      expect(body.object).to.equal('list');
      expect(body.data).to.have.length(1);
      expect(body.data[0]).to.include({ id: 'tiny-model', object: 'model', owned_by: 'fake-llm' });
      expect(body.data[0]?.created).to.be.a('number');
      const models = await client.models.list();
      expect(models.data.map((model) => model.id)).to.deep.equal(['tiny-model']);
    });
  });

  describe('non-streamed chat completions', () => {
    it('echoes the last user message in a chat.completion when no rule or magic word applies', async () => {
      const completion = await client.chat.completions.create({
        model: 'my-model',
        messages: [{ role: 'system', content: 'be brief' }, user('first'), { role: 'assistant', content: 'ok' }, user('hello there')],
      });
      expect(completion.id).to.match(/^chatcmpl-/);
      expect(completion.object).to.equal('chat.completion');
      expect(completion.model).to.equal('my-model');
      expect(completion.created).to.be.closeTo(Date.now() / 1000, 5);
      expect(completion.choices).to.have.length(1);
      expect(completion.choices[0]?.message).to.include({ role: 'assistant', content: 'Echo: hello there' });
      expect(completion.choices[0]?.finish_reason).to.equal('stop');
      expect(completion.usage).to.deep.equal({ prompt_tokens: 6, completion_tokens: 3, total_tokens: 9 });
    });

    it('records every request body and its headers in order when requests arrive', async () => {
      await client.chat.completions.create({ model: 'm', messages: [user('one')] });
      await client.embeddings.create({ model: 'e', input: 'two' });
      await client.chat.completions.create({ model: 'm', messages: [user('three')], temperature: 0.2 });
      expect(fake.requests.map((request) => request.kind)).to.deep.equal(['chat', 'embeddings', 'chat']);
      expect(fake.requests[0]?.body.messages).to.deep.equal([user('one')]);
      expect(fake.requests[1]?.body.input).to.equal('two');
      expect(fake.requests[2]?.body.temperature).to.equal(0.2);
      expect(fake.requests[2]?.headers.authorization).to.equal('Bearer x');
      expect(fake.requests.map((request) => request.seq)).to.satisfy((seqs: number[]) => seqs[0]! < seqs[1]! && seqs[1]! < seqs[2]!);
    });

    it('answers with the first matching rule and uses it up when the rule has times', async () => {
      fake.script(
        { match: { lastUserIncludes: 'weather' }, reply: { content: 'Sunny' }, times: 1 },
        { match: { lastUserIncludes: 'weather' }, reply: { content: 'Rainy' } },
      );
      const ask = async (text: string): Promise<string | null | undefined> =>
        (await client.chat.completions.create({ model: 'm', messages: [user(text)] })).choices[0]?.message.content;
      expect(await ask('hello')).to.equal('Echo: hello');
      expect(await ask('the weather?')).to.equal('Sunny');
      expect(await ask('the weather again?')).to.equal('Rainy');
      expect(fake.pendingRules()).to.equal(1);
    });

    it('matches rules on the model and on tool results when those conditions are given', async () => {
      fake.script(
        { match: { model: 'other' }, reply: { content: 'other model' } },
        { match: { hasToolResults: true }, reply: (request) => ({ content: `saw ${request.messages.length} messages` }) },
      );
      const toolTurn: ChatCompletionMessageParam[] = [
        user('go'),
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 't', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: '42' },
      ];
      const byModel = await client.chat.completions.create({ model: 'other', messages: [user('x')] });
      const byTools = await client.chat.completions.create({ model: 'm', messages: toolTurn });
      const neither = await client.chat.completions.create({ model: 'm', messages: [user('x')] });
      expect(byModel.choices[0]?.message.content).to.equal('other model');
      expect(byTools.choices[0]?.message.content).to.equal('saw 3 messages');
      expect(neither.choices[0]?.message.content).to.equal('Echo: x');
    });

    it('returns OpenAI tool_calls with finish_reason tool_calls when a rule scripts tool calls', async () => {
      fake.script({
        reply: { toolCalls: [{ name: 'get_weather', arguments: { city: 'Paris' }, id: 'call_fixed' }, { name: 'now', arguments: '{}' }] },
      });
      const completion = await client.chat.completions.create({ model: 'm', messages: [user('weather?')] });
      const choice = completion.choices[0];
      expect(choice?.finish_reason).to.equal('tool_calls');
      expect(choice?.message.content).to.equal(null);
      const calls = (choice?.message.tool_calls ?? []).map((call) => {
        if (call.type !== 'function') throw new Error('expected a function tool call');
        return { id: call.id, name: call.function.name, args: JSON.parse(call.function.arguments) as unknown };
      });
      expect(calls[0]).to.deep.equal({ id: 'call_fixed', name: 'get_weather', args: { city: 'Paris' } });
      expect(calls[1]).to.include({ name: 'now' });
      expect(calls[1]?.id).to.match(/^call_[0-9a-f]+$/);
    });

    it('calls the tool named by [[tool:NAME {json}]] and then reports its result when tool results follow', async () => {
      const ask = user('please [[tool:get_sum {"a": 2, "b": [3]}]]');
      const first = await client.chat.completions.create({ model: 'm', messages: [ask] });
      const call = first.choices[0]?.message.tool_calls?.[0];
      if (call?.type !== 'function') throw new Error('expected a function tool call');
      expect(call.function.name).to.equal('get_sum');
      expect(JSON.parse(call.function.arguments)).to.deep.equal({ a: 2, b: [3] });
      const second = await client.chat.completions.create({
        model: 'm',
        messages: [ask, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: '5' }],
      });
      expect(second.choices[0]?.message.content).to.equal('Tool result: 5');
      expect(second.choices[0]?.finish_reason).to.equal('stop');
    });

    it('reports the usage a rule scripts instead of the word counts, streamed or not', async () => {
      fake.script({ reply: { content: 'one two three', usage: { prompt_tokens: 100, completion_tokens: 7 } }, times: 2 });
      const plain = await client.chat.completions.create({ model: 'm', messages: [user('x')] });
      const stream = await client.chat.completions.create({ model: 'm', messages: [user('x')], stream: true, stream_options: { include_usage: true } });
      let streamed;
      for await (const chunk of stream) streamed = chunk.usage ?? streamed;
      const counted = await client.chat.completions.create({ model: 'm', messages: [user('a b')] });
      expect(plain.usage).to.deep.include({ prompt_tokens: 100, completion_tokens: 7, total_tokens: 107 });
      expect(streamed).to.deep.include({ prompt_tokens: 100, completion_tokens: 7, total_tokens: 107 });
      expect(counted.usage).to.deep.include({ prompt_tokens: 2, completion_tokens: 3 });
    });

    it('matches rules on the system messages when systemIncludes is given', async () => {
      fake.script({ match: { systemIncludes: 'You are billing' }, reply: { content: 'billing here' } });
      const billing = await client.chat.completions.create({ model: 'm', messages: [{ role: 'system', content: 'Base.\n\nYou are billing.' }, user('x')] });
      const other = await client.chat.completions.create({ model: 'm', messages: [{ role: 'system', content: 'Base.' }, user('You are billing')] });
      expect(billing.choices[0]?.message.content).to.equal('billing here');
      expect(other.choices[0]?.message.content).to.equal('Echo: You are billing');
    });

    describe('hand-offs', () => {
      const transferTool = (state: string) => ({ type: 'function' as const, function: { name: `transfer_to_${state}`, parameters: { type: 'object', properties: {} } } });
      const tools = [transferTool('billing'), transferTool('tech_support')];
      const firstCall = (completion: OpenAI.Chat.ChatCompletion) => {
        const call = completion.choices[0]?.message.tool_calls?.[0];
        return call?.type === 'function' ? call : undefined;
      };

      it('calls transfer_to_<state> for the first offered state the message names, underscores read as spaces', async () => {
        const billing = await client.chat.completions.create({ model: 'm', tools, messages: [user('A Billing question')] });
        const support = await client.chat.completions.create({ model: 'm', tools, messages: [user('tech support please')] });
        expect(firstCall(billing)?.function).to.deep.equal({ name: 'transfer_to_billing', arguments: '{}' });
        expect(billing.choices[0]?.finish_reason).to.equal('tool_calls');
        expect(firstCall(support)?.function.name).to.equal('transfer_to_tech_support');
      });

      it('calls the state [[transfer:NAME]] names only when it is offered, and names no state otherwise', async () => {
        const named = await client.chat.completions.create({ model: 'm', tools, messages: [user('billing? no: [[transfer:tech_support]]')] });
        const notOffered = await client.chat.completions.create({ model: 'm', tools, messages: [user('[[transfer:sales]]')] });
        const unrelated = await client.chat.completions.create({ model: 'm', tools, messages: [user('hello')] });
        const withoutTools = await client.chat.completions.create({ model: 'm', messages: [user('a billing question')] });
        expect(firstCall(named)?.function.name).to.equal('transfer_to_tech_support');
        expect(notOffered.choices[0]?.message.content).to.equal('Echo: [[transfer:sales]]');
        expect(unrelated.choices[0]?.message.content).to.equal('Echo: hello');
        expect(withoutTools.choices[0]?.message.content).to.equal('Echo: a billing question');
      });

      it('hands over once a turn and answers the user message, not the transfer\'s result, after it', async () => {
        const ask = user('a billing question');
        const first = await client.chat.completions.create({ model: 'm', tools, messages: [ask] });
        const call = firstCall(first)!;
        const after = await client.chat.completions.create({
          model: 'm',
          tools,
          messages: [ask, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: '{"assistant":"billing"}' }],
        });
        expect(after.choices[0]?.message.content).to.equal('Echo: a billing question');
      });
    });

    it('replies with the roles and contents it received when the message asks for [[echo-context]]', async () => {
      const messages: ChatCompletionMessageParam[] = [
        { role: 'system', content: 'You are helpful.' },
        { role: 'system', content: 'Memory: likes tea' },
        user('what do you see? [[echo-context]]'),
      ];
      const completion = await client.chat.completions.create({ model: 'm', messages });
      expect(JSON.parse(completion.choices[0]?.message.content ?? '')).to.deep.equal(messages);
    });

    it('uses the default reply set at run time when no rule applies', async () => {
      fake.setBehaviour({ defaultReply: (request) => ({ content: `${request.messages.length} messages` }) });
      const changed = await client.chat.completions.create({ model: 'm', messages: [user('a'), user('b')] });
      fake.reset();
      const restored = await client.chat.completions.create({ model: 'm', messages: [user('a')] });
      expect(changed.choices[0]?.message.content).to.equal('2 messages');
      expect(restored.choices[0]?.message.content).to.equal('Echo: a');
    });

    it('ignores magic words when magicWords is switched off', async () => {
      fake.setBehaviour({ magicWords: false });
      const completion = await client.chat.completions.create({ model: 'm', messages: [user('[[error:500]]')] });
      expect(completion.choices[0]?.message.content).to.equal('Echo: [[error:500]]');
    });
  });

  describe('streamed chat completions', () => {
    it('writes exactly the OpenAI SSE frames, pieces as scripted, when stream is true', async () => {
      fake.script({ reply: { content: 'Hello world', pieces: ['Hel', 'lo wor', 'ld'] } });
      const response = await postJson('/chat/completions', { model: 'm', stream: true, messages: [user('hi')] });
      expect(response.status).to.equal(200);
      expect(response.headers.get('content-type')).to.equal('text/event-stream');
      const payloads = ssePayloads(await response.text());
      expect(payloads.at(-1)).to.equal('[DONE]');
      const chunks = chunksOf(payloads);
      expect(chunks).to.have.length(5);
      expect(new Set(chunks.map((chunk) => chunk.id)).size).to.equal(1);
      expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk' && chunk.model === 'm')).to.equal(true);
      expect(chunks.map((chunk) => chunk.choices[0]?.delta)).to.deep.equal([
        { role: 'assistant', content: '' },
        { content: 'Hel' },
        { content: 'lo wor' },
        { content: 'ld' },
        {},
      ]);
      expect(chunks.map((chunk) => chunk.choices[0]?.finish_reason)).to.deep.equal([null, null, null, null, 'stop']);
    });

    it('sends a usage chunk before [DONE] when stream_options.include_usage is set', async () => {
      const body = { model: 'm', stream: true, stream_options: { include_usage: true }, messages: [user('count me')] };
      const payloads = ssePayloads(await (await postJson('/chat/completions', body)).text());
      const chunks = chunksOf(payloads);
      const last = chunks.at(-1);
      expect(payloads.at(-1)).to.equal('[DONE]');
      expect(last?.choices).to.deep.equal([]);
      expect(last?.usage).to.deep.equal({ prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 });
      expect(chunks.slice(0, -1).every((chunk) => chunk.usage === null)).to.equal(true);
    });

    it('streams the echo word by word so the openai client reassembles it when stream is true', async () => {
      const stream = await client.chat.completions.create({ model: 'm', stream: true, messages: [user('one two three')] });
      const pieces: string[] = [];
      for await (const chunk of stream) pieces.push(chunk.choices[0]?.delta.content ?? '');
      expect(pieces.join('')).to.equal('Echo: one two three');
      expect(pieces.filter(Boolean)).to.deep.equal(['Echo: ', 'one ', 'two ', 'three']);
    });

    it('streams tool-call deltas that the openai client reassembles into the scripted calls', async () => {
      const longArgs = { query: 'a fairly long search query', limit: 10 };
      fake.script({ reply: { toolCalls: [{ name: 'search', arguments: longArgs }, { name: 'ping', arguments: {}, id: 'call_ping' }] } });
      const runner = client.chat.completions.stream({ model: 'm', messages: [user('find')] });
      const argumentDeltas: string[] = [];
      runner.on('tool_calls.function.arguments.delta', (event) => argumentDeltas.push(event.arguments_delta));
      const completion = await runner.finalChatCompletion();
      const choice = completion.choices[0];
      expect(choice?.finish_reason).to.equal('tool_calls');
      const calls = (choice?.message.tool_calls ?? []).map((call) => {
        if (call.type !== 'function') throw new Error('expected a function tool call');
        return { id: call.id, name: call.function.name, args: JSON.parse(call.function.arguments) as unknown };
      });
      expect(calls).to.have.length(2);
      expect(calls[0]).to.deep.include({ name: 'search', args: longArgs });
      expect(calls[0]?.id).to.match(/^call_/);
      expect(calls[1]).to.deep.equal({ id: 'call_ping', name: 'ping', args: {} });
      expect(argumentDeltas.length).to.be.greaterThan(2);
    });

    it('opens each tool call with index, id, type and name, then sends only argument pieces', async () => {
      fake.script({ reply: { toolCalls: [{ name: 'lookup', arguments: { key: 'abcdefghijkl' }, id: 'call_a' }] } });
      const response = await postJson('/chat/completions', { model: 'm', stream: true, messages: [user('go')] });
      const deltas = chunksOf(ssePayloads(await response.text())).map((chunk) => chunk.choices[0]?.delta);
      expect(deltas[0]).to.deep.equal({ role: 'assistant', content: null });
      expect(deltas[1]?.tool_calls).to.deep.equal([
        { index: 0, id: 'call_a', type: 'function', function: { name: 'lookup', arguments: '' } },
      ]);
      const rest = deltas.slice(2, -1).map((delta) => delta?.tool_calls?.[0]);
      expect(rest.every((call) => call?.index === 0 && call.id === undefined && call.function?.name === undefined)).to.equal(true);
      expect(rest.map((call) => call?.function?.arguments).join('')).to.equal('{"key":"abcdefghijkl"}');
    });

    it('writes each piece as soon as it is due when pieces are paced', async () => {
      const start = performance.now();
      const response = await postJson('/chat/completions', { model: 'm', stream: true, messages: [user('a b c [[pace:150]]')] });
      const chunks = await timedChunks(response, start);
      const firstContent = chunks.find((chunk) => chunk.text.includes('"content":"Echo: "'));
      const last = chunks.at(-1);
      expect(last?.text.endsWith('data: [DONE]\n\n')).to.equal(true);
      // Five pieces ('Echo: ', 'a ', 'b ', 'c ', '[[pace:150]]'), so four pauses: the last piece cannot come sooner
      // (a busy client only reads it later), and the first came before the pauses were over, not with the last.
      expect(last?.at ?? 0).to.be.at.least(4 * 150 - 10);
      expect((last?.at ?? 0) - (firstContent?.at ?? Infinity)).to.be.at.least(150);
    });
  });

  describe('failures', () => {
    it('answers the scripted status with an OpenAI error body when a rule scripts an error', async () => {
      fake.script({ reply: { error: { status: 503, message: 'overloaded' } }, times: 2 });
      const error = await rejection(client.chat.completions.create({ model: 'm', messages: [user('x')] }));
      expect(error).to.be.instanceOf(APIError);
      expect((error as APIError).status).to.equal(503);
      expect((error as APIError).message).to.include('overloaded');
      const response = await postJson('/chat/completions', { model: 'm', messages: [user('x')] });
      expect(response.status).to.equal(503);
      expect(await response.json()).to.deep.equal({ error: { message: 'overloaded', type: 'server_error', param: null, code: null } });
    });

    it('answers the status named by [[error:429]] when the last user message holds it', async () => {
      const error = await rejection(client.chat.completions.create({ model: 'm', messages: [user('[[error:429]]')] }));
      expect((error as APIError).status).to.equal(429);
    });

    it('waits before the first byte when the message holds [[slow:MS]]', async () => {
      const start = performance.now();
      const completion = await client.chat.completions.create({ model: 'm', messages: [user('hi [[slow:200]]')] });
      expect(performance.now() - start).to.be.at.least(190);
      expect(completion.choices[0]?.message.content).to.equal('Echo: hi [[slow:200]]');
    });

    it('cuts the stream after N pieces and records a cut, not an abort, when the message holds [[cut:2]]', async () => {
      const cut = new Promise<RecordedRequest>((resolve) => fake.on('cut', resolve));
      const stream = await client.chat.completions.create({ model: 'm', stream: true, messages: [user('a b c d e [[cut:2]]')] });
      const pieces: string[] = [];
      const error = await rejection(
        (async () => {
          for await (const chunk of stream) pieces.push(chunk.choices[0]?.delta.content ?? '');
        })(),
      );
      expect(error).to.be.instanceOf(Error);
      expect(pieces.filter(Boolean)).to.deep.equal(['Echo: ', 'a ']);
      const record = await cut;
      expect(record).to.include({ cut: true, aborted: false, finished: false, status: 200 });
    });

    it('truncates a non-streamed body so the client fails to read it when a rule sets cutAfterPieces', async () => {
      fake.script({ reply: { cutAfterPieces: 0 }, times: 2 });
      const response = await postJson('/chat/completions', { model: 'm', messages: [user('x')] });
      expect(response.status).to.equal(200);
      expect(await rejection(response.text())).to.be.instanceOf(TypeError);
      expect(await rejection(client.chat.completions.create({ model: 'm', messages: [user('x')] }))).to.be.instanceOf(Error);
      expect(fake.requests.map((request) => request.cut)).to.deep.equal([true, true]);
    });

    it('records an abort without sleeping when the client gives up on a hanging request', async () => {
      const controller = new AbortController();
      const pending = client.chat.completions.create({ model: 'm', messages: [user('[[hang]]')] }, { signal: controller.signal });
      const received = await fake.waitForRequest((request) => request.kind === 'chat');
      expect(received.aborted).to.equal(false);
      controller.abort();
      expect(await rejection(pending)).to.be.instanceOf(APIUserAbortError);
      const aborted = await fake.waitForAbort();
      expect(aborted).to.equal(received);
      expect(aborted).to.include({ aborted: true, finished: false, status: undefined });
    });

    it('emits an abort event when the client stops reading a paced stream midway', async () => {
      const aborts: RecordedRequest[] = [];
      fake.on('abort', (request) => aborts.push(request));
      fake.script({ reply: { content: 'one two three four', pieceDelayMs: 50 } });
      const controller = new AbortController();
      const stream = await client.chat.completions.create(
        { model: 'm', stream: true, messages: [user('x')] },
        { signal: controller.signal },
      );
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content === 'one ') controller.abort();
      }
      const aborted = await fake.waitForAbort();
      expect(aborts).to.deep.equal([aborted]);
      expect(aborted).to.include({ aborted: true, finished: false, cut: false, status: 200 });
    });

    it('marks a request finished and not aborted when its response completed', async () => {
      const finished = new Promise<RecordedRequest>((resolve) => fake.on('finish', resolve));
      await client.chat.completions.create({ model: 'm', messages: [user('x')] });
      expect(await finished).to.include({ finished: true, aborted: false, cut: false, status: 200 });
    });

    it('rejects waitForAbort after its timeout when no client went away', async () => {
      const error = await rejection(fake.waitForAbort(undefined, 20));
      expect((error as Error).message).to.include("no matching 'abort' within 20 ms");
    });

    it('answers 404 with an OpenAI error body when the route is unknown', async () => {
      const response = await fetch(`${fake.url}/completions/nope`);
      const body = (await response.json()) as { error: { message: string; type: string } };
      expect(response.status).to.equal(404);
      expect(body.error.message).to.include('/v1/completions/nope');
      expect(body.error.type).to.equal('not_found_error');
    });

    it('answers 400 when the body is not JSON', async () => {
      const response = await postJson('/chat/completions', '{"model": ');
      const body = (await response.json()) as { error: { type: string } };
      expect(response.status).to.equal(400);
      expect(body.error.type).to.equal('invalid_request_error');
    });

    it('answers 400 when messages is missing', async () => {
      const response = await postJson('/chat/completions', { model: 'm' });
      expect(response.status).to.equal(400);
    });

    it('answers 401 unless the bearer key matches when apiKey is set', async () => {
      fake.setBehaviour({ apiKey: 'secret' });
      const wrong = await rejection(client.chat.completions.create({ model: 'm', messages: [user('x')] }));
      const wrongModels = await fetch(`${fake.url}/models`);
      const right = new OpenAI({ baseURL: fake.url, apiKey: 'secret', maxRetries: 0 });
      const completion = await right.chat.completions.create({ model: 'm', messages: [user('x')] });
      expect((wrong as APIError).status).to.equal(401);
      expect(wrongModels.status).to.equal(401);
      expect(completion.choices[0]?.message.content).to.equal('Echo: x');
    });
  });

  describe('POST /v1/embeddings', () => {
    it('returns one unit vector of the default dimension per input when asked for floats', async () => {
      const response = await client.embeddings.create({ model: 'emb', input: ['red apple', 'green pear'], encoding_format: 'float' });
      expect(response.object).to.equal('list');
      expect(response.model).to.equal('emb');
      expect(response.data.map((item) => item.index)).to.deep.equal([0, 1]);
      expect(response.data.every((item) => item.object === 'embedding' && item.embedding.length === 256)).to.equal(true);
      expect(norm(response.data[0]?.embedding ?? [])).to.be.closeTo(1, 1e-9);
      expect(response.usage).to.deep.equal({ prompt_tokens: 4, total_tokens: 4 });
    });

    it('gives the same vectors as base64 when the client asks for base64 by default', async () => {
      const asFloats = await client.embeddings.create({ model: 'e', input: 'the cat sat', encoding_format: 'float' });
      const asBase64 = await client.embeddings.create({ model: 'e', input: 'the cat sat' });
      const floats = asFloats.data[0]?.embedding ?? [];
      const decoded = asBase64.data[0]?.embedding ?? [];
      expect(fake.requests[1]?.body.encoding_format).to.equal('base64');
      expect(decoded).to.have.length(256);
      decoded.forEach((value, index) => expect(value).to.be.closeTo(floats[index] ?? NaN, 1e-6));
    });

    it('embeds deterministically and puts texts that share words closer', async () => {
      const embed = async (input: string[]): Promise<number[][]> =>
        (await client.embeddings.create({ model: 'e', input, encoding_format: 'float' })).data.map((item) => item.embedding);
      const [cats, catsAgain, catsAndDogs, finance] = await embed(['cats purr', 'cats purr', 'cats and dogs purr', 'stock market rates']);
      expect(catsAgain).to.deep.equal(cats);
      expect(cosine(cats!, catsAndDogs!)).to.be.greaterThan(cosine(cats!, finance!) + 0.3);
    });

    it('honours the requested dimensions and the configured default', async () => {
      const asked = await client.embeddings.create({ model: 'e', input: 'x', dimensions: 32, encoding_format: 'float' });
      fake.setBehaviour({ embeddingDimensions: 8 });
      const configured = await client.embeddings.create({ model: 'e', input: 'x', encoding_format: 'float' });
      expect(asked.data[0]?.embedding).to.have.length(32);
      expect(configured.data[0]?.embedding).to.have.length(8);
    });

    it('answers 404 like a server without embeddings when embeddings are switched off', async () => {
      fake.setBehaviour({ embeddings: false });
      const error = await rejection(client.embeddings.create({ model: 'e', input: 'x' }));
      expect((error as APIError).status).to.equal(404);
    });
  });

  describe('lifecycle', () => {
    it('drops hanging connections and frees its port when closed', async () => {
      const own = await startFakeLlm({ rules: [{ reply: { hang: true } }] });
      const ownClient = new OpenAI({ baseURL: own.url, apiKey: 'x', maxRetries: 0 });
      const pending = ownClient.chat.completions.create({ model: 'm', messages: [user('x')] });
      await own.waitForRequest();
      await own.close();
      expect(await rejection(pending)).to.be.instanceOf(APIConnectionError);
      expect(await rejection(fetch(`${own.url}/models`))).to.be.instanceOf(TypeError);
    });

    it('prints its URL and serves until SIGTERM when run from the command line', async () => {
      const args = ['--import', 'tsx', 'scripts/fake-llm.ts', '--port', '0', '--model', 'cli-model'];
      const child = spawn(process.execPath, args, { cwd: projectRoot, stdio: ['ignore', 'pipe', 'inherit'] });
      const exited = once(child, 'exit');
      try {
        const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
        const url = /(http:\/\/127\.0\.0\.1:\d+\/v1)$/.exec(line)?.[1];
        expect(url, line).to.be.a('string');
        const models = (await (await fetch(`${url}/models`)).json()) as { data: Array<{ id: string }> };
        expect(models.data[0]?.id).to.equal('cli-model');
      } finally {
        child.kill('SIGTERM');
      }
      expect(await exited).to.deep.equal([0, null]);
    });
  });
});
