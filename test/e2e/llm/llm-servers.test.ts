import { expect } from 'chai';
import OpenAI from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { SERVER_FIXTURES, type ServerName } from '../../fixtures/llm-servers/index.js';
import { storedTranscript } from '../../fault/transcript.js';
import { expectSchema } from '../../support/openai-schema.js';
import { startReplayLlm, type ReplayLlm } from '../../support/replay-llm-server.js';
import { startTestService, type TestService } from '../../support/service-harness.js';

// Both APIs, with the official openai client, in front of each LLM server as it really
// answers: the replay upstream plays each server's wire shapes (test/fixtures/llm-servers/,
// each citing the server's own source).

const THINKING = { reasoning: 'The user greets me; I greet back.', content: 'Hello there!' };
const WEATHER_TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
];

/** The chat requests the LLM server received. */
function chatBodies(llm: ReplayLlm): Array<{ messages: Array<{ role: string; content?: unknown }>; tools?: unknown[] }> {
  return llm.requests.filter((request) => request.path.endsWith('/chat/completions')).map((request) => request.body);
}

/** Every text the last chat request's messages held. */
function lastContextText(llm: ReplayLlm): string {
  return chatBodies(llm)
    .at(-1)!
    .messages.map((message) => (typeof message.content === 'string' ? message.content : JSON.stringify(message.content ?? '')))
    .join('\n');
}

/** Servers that tell their context window (Ollama's /api/ps has context_length from 0.10; before, it truncates silently). */
const TELLS_WINDOW = (name: ServerName) => name !== 'ollama-0.8' && name !== 'ollama-0.4';

for (const name of Object.keys(SERVER_FIXTURES) as ServerName[]) {
  describe(`the service in front of ${name}`, () => {
    let llm: ReplayLlm;
    let harness: TestService;
    let client: OpenAI;

    before(async () => {
      llm = await startReplayLlm({ server: name, setup: { contextWindow: 2048 } });
      harness = await startTestService({ env: { LLM_BASE_URL: llm.url } });
      client = harness.client;
    });
    after(async () => {
      await harness?.close();
      await llm?.close();
    });
    beforeEach(() => llm.reset());

    it("streams the model's reasoning as reasoning_content and keeps it out of the reply, the store and the next context", async () => {
      llm.script({ match: { lastUserIncludes: 'Hi' }, turn: THINKING });
      const session = `reasoning-${name}`;
      const stream = await client.chat.completions.create(
        { model: 'svc-agent', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Hi' }] },
        { headers: { 'X-Session-ID': session } },
      );
      const chunks: ChatCompletionChunk[] = [];
      for await (const chunk of stream) chunks.push(chunk);
      for (const chunk of chunks) expectSchema('CreateChatCompletionStreamResponse', chunk);
      const deltas = chunks.flatMap((chunk) => chunk.choices.map((choice) => choice.delta as { content?: string; reasoning_content?: string }));
      expect(deltas.map((delta) => delta.reasoning_content ?? '').join('').trim()).to.equal(THINKING.reasoning);
      expect(deltas.map((delta) => delta.content ?? '').join('')).to.equal(THINKING.content);
      expect(chunks.at(-1)!.usage?.completion_tokens).to.be.greaterThan(0);

      const next = await client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: 'Hi again' }] }, { headers: { 'X-Session-ID': session } });
      expectSchema('CreateChatCompletionResponse', next);
      const message = next.choices[0]!.message as { content: string | null; reasoning_content?: string };
      expect(message.content).to.equal('Hello there!');
      expect(message.reasoning_content?.trim()).to.equal(THINKING.reasoning);
      // The reply went back to the model; its reasoning did not.
      const context = lastContextText(llm);
      expect(context).to.include('Hello there!');
      expect(context).to.not.include('greet back');
    });

    it('returns parallel tool calls to the client as separate calls, and answers with their results', async () => {
      llm.script(
        {
          match: { hasToolResults: false, lastUserIncludes: 'Paris and Rome' },
          turn: {
            toolCalls: [
              { name: 'get_weather', arguments: { city: 'Paris' } },
              { name: 'get_weather', arguments: { city: 'Rome' } },
            ],
          },
        },
        { match: { hasToolResults: true }, turn: { content: 'Sunny in both.' } },
      );
      const question = { role: 'user' as const, content: 'Weather in Paris and Rome?' };
      const stream = await client.chat.completions.create({ model: 'svc-agent', stream: true, tools: WEATHER_TOOLS, messages: [question] });
      const calls = new Map<number, { id: string; name: string; arguments: string }>();
      let finish: string | null = null;
      for await (const chunk of stream) {
        for (const delta of chunk.choices[0]?.delta.tool_calls ?? []) {
          const call = calls.get(delta.index) ?? { id: '', name: '', arguments: '' };
          call.id ||= delta.id ?? '';
          call.name += delta.function?.name ?? '';
          call.arguments += delta.function?.arguments ?? '';
          calls.set(delta.index, call);
        }
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      expect(finish).to.equal('tool_calls');
      const made = [...calls.values()];
      expect(made.map((call) => [call.name, JSON.parse(call.arguments)])).to.deep.equal([
        ['get_weather', { city: 'Paris' }],
        ['get_weather', { city: 'Rome' }],
      ]);
      expect(new Set(made.map((call) => call.id)).size).to.equal(2);

      const answer = await client.chat.completions.create({
        model: 'svc-agent',
        tools: WEATHER_TOOLS,
        messages: [
          question,
          { role: 'assistant', content: null, tool_calls: made.map((call) => ({ id: call.id, type: 'function' as const, function: { name: call.name, arguments: call.arguments } })) },
          ...made.map((call) => ({ role: 'tool' as const, tool_call_id: call.id, content: `Sunny in ${JSON.parse(call.arguments).city}` })),
        ],
      });
      expect(answer.choices[0]!.message.content).to.equal('Sunny in both.');
    });

    it('gives the Responses API a reasoning item before the message, streamed and stored', async () => {
      llm.script({ match: { lastUserIncludes: 'Hello' }, turn: THINKING });
      const response = await client.responses.create({ model: 'svc-agent', input: 'Hello' });
      expectSchema('Response', response);
      expect(response.output.map((item) => item.type)).to.deep.equal(['reasoning', 'message']);
      const reasoning = response.output[0] as { content?: Array<{ type: string; text: string }> };
      expect(reasoning.content?.map((part) => part.type)).to.deep.equal(['reasoning_text']);
      expect(reasoning.content?.[0]?.text.trim()).to.equal(THINKING.reasoning);
      expect(response.output_text).to.equal(THINKING.content);

      const events: ResponseStreamEvent[] = [];
      const stream = await client.responses.create({ model: 'svc-agent', input: 'Hello again', stream: true });
      for await (const event of stream) events.push(event);
      for (const event of events) expectSchema('ResponseStreamEvent', event);
      const deltas = events.filter((event) => event.type === 'response.reasoning_text.delta').map((event) => (event as { delta: string }).delta);
      expect(deltas.join('').trim()).to.equal(THINKING.reasoning);
      const completed = events.at(-1) as { type: string; response: OpenAI.Responses.Response };
      expect(completed.type).to.equal('response.completed');
      expect(completed.response.output.map((item) => item.type)).to.deep.equal(['reasoning', 'message']);
      // The SDK's own stream helper rebuilds the same response from the events.
      const helper = client.responses.stream({ model: 'svc-agent', input: 'Hello, helper' });
      const final = await helper.finalResponse();
      expect(final.output.map((item) => item.type)).to.deep.equal(['reasoning', 'message']);
    });

    if (TELLS_WINDOW(name)) {
      it('answers 400 context_length_exceeded, before calling the model, to a message its window cannot hold', async () => {
        const huge = Array.from({ length: 3000 }, (_, index) => `w${index}`).join(' ');
        for (const stream of [false, true]) {
          const error = await client.chat.completions.create({ model: 'svc-agent', stream, messages: [{ role: 'user', content: huge }] }).catch((caught: unknown) => caught);
          expect(error, `stream: ${stream}`).to.be.instanceOf(OpenAI.BadRequestError);
          expect((error as InstanceType<typeof OpenAI.BadRequestError>).code).to.equal('context_length_exceeded');
        }
        expect(chatBodies(llm)).to.have.length(0);
      });

      it('fits a long conversation into the window instead of sending it all', async () => {
        const words = Array.from({ length: 60 }, (_, index) => `word${index}`).join(' ');
        const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [];
        for (let turn = 0; turn < 30; turn++) messages.push({ role: 'user', content: `q${turn} ${words}` }, { role: 'assistant', content: `a${turn} ${words}` });
        messages.push({ role: 'user', content: 'Summarise, please.' });
        const reply = await client.chat.completions.create({ model: 'svc-agent', messages });
        expect(reply.choices[0]!.message.content).to.equal('Echo: Summarise, please.');
        const sent = chatBodies(llm).at(-1)!.messages;
        expect(sent.length).to.be.lessThan(messages.length);
        expect(sent.at(-1)).to.deep.equal({ role: 'user', content: 'Summarise, please.' });
        expect(llm.truncations).to.equal(0);
      });
    }

    it('shows on /health what it learnt of the server', async () => {
      const health = (await (await fetch(`${harness.service.url}/health`)).json()) as { llm: Record<string, unknown> };
      expect(health.llm.model).to.be.a('string');
      expect(health.llm.context_window).to.equal(TELLS_WINDOW(name) ? 2048 : null);
      // Ollama 0.4 streams no usage whatever is asked: the service counts it.
      expect(health.llm.streams_usage).to.equal(name !== 'ollama-0.4');
      expect(health.llm.reasoning).to.be.an('array').that.is.not.empty;
      expect(health.llm.tool_calls).to.include('native');
    });
  });
}

describe('the service in front of servers started without their parsers', () => {
  let harness: TestService | undefined;
  let llm: ReplayLlm | undefined;
  afterEach(async () => {
    await harness?.close();
    await llm?.close();
  });

  it('runs tools whose calls vLLM, started without a tool-call parser, could not take: they go in the prompt and come back as text', async () => {
    llm = await startReplayLlm({ server: 'vllm', setup: { toolCallParser: false, reasoningParser: false } });
    llm.script({ match: { hasToolResults: false }, turn: { reasoning: 'I need the weather.', toolCalls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] } });
    harness = await startTestService({ env: { LLM_BASE_URL: llm.url } });
    const reply = await harness.client.chat.completions.create({ model: 'svc-agent', tools: WEATHER_TOOLS, messages: [{ role: 'user', content: 'Weather in Oslo?' }] });
    const message = reply.choices[0]!.message as OpenAI.Chat.Completions.ChatCompletionMessage & { reasoning_content?: string };
    expect(reply.choices[0]!.finish_reason).to.equal('tool_calls');
    expect(message.tool_calls?.map((call) => call.type === 'function' && [call.function.name, JSON.parse(call.function.arguments)])).to.deep.equal([['get_weather', { city: 'Oslo' }]]);
    expect(message.content).to.equal(null);
    expect(message.reasoning_content?.trim()).to.equal('I need the weather.');
    const bodies = chatBodies(llm);
    expect(bodies[0]!.tools).to.have.length(1);
    expect(bodies.at(-1)!.tools).to.equal(undefined);
    const health = (await (await fetch(`${harness.service.url}/health`)).json()) as { llm: Record<string, unknown> };
    expect(health.llm).to.deep.include({ tools_in_prompt: true });
    expect(health.llm.tool_calls).to.include('hermes');
    expect(health.llm.reasoning).to.include('think_tags');
  });

  it("keeps to a Mistral-style template's alternation after its first refusal, across a client tool round", async () => {
    llm = await startReplayLlm({ server: 'vllm', setup: { requireAlternation: true } });
    llm.script({ match: { hasToolResults: false, lastUserIncludes: 'Oslo' }, turn: { toolCalls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] } }, { match: { hasToolResults: true }, turn: { content: 'Rainy.' } });
    harness = await startTestService({ env: { LLM_BASE_URL: llm.url } });
    const session = { headers: { 'X-Session-ID': 'alternating' } };
    // The client's own system message makes two with the service's: the template refuses that.
    const brief = { role: 'system' as const, content: 'Answer briefly.' };
    const first = await harness.client.chat.completions.create({ model: 'svc-agent', tools: WEATHER_TOOLS, messages: [brief, { role: 'user', content: 'Weather in Oslo?' }] }, session);
    const call = first.choices[0]!.message.tool_calls![0]!;
    const second = await harness.client.chat.completions.create(
      {
        model: 'svc-agent',
        tools: WEATHER_TOOLS,
        messages: [
          brief,
          { role: 'user', content: 'Weather in Oslo?' },
          { role: 'assistant', content: null, tool_calls: [call] },
          { role: 'tool', tool_call_id: call.id, content: 'Rain, 8 °C' },
        ],
      },
      session,
    );
    expect(second.choices[0]!.message.content).to.equal('Rainy.');
    const third = await harness.client.chat.completions.create({ model: 'svc-agent', messages: [brief, { role: 'user', content: 'Thanks!' }] }, session);
    expect(third.choices[0]!.message.content).to.equal('Echo: Thanks!');
    // Refused once (the first call, with two system messages), then every call alternates.
    const [refused, ...accepted] = chatBodies(llm).map((body) => body.messages.map((message) => message.role));
    expect(refused!.filter((role) => role === 'system')).to.have.length(2);
    expect(accepted).to.have.length(3);
    for (const roles of accepted) {
      expect(roles.filter((role) => role === 'system')).to.have.length(1);
      const dialogue = roles.slice(1).filter((role) => role !== 'tool');
      expect(dialogue.every((role, index) => index === 0 || role !== dialogue[index - 1]), roles.join(',')).to.equal(true);
    }
  });
});

describe("the service given the LLM server's own context-length error", () => {
  let llm: ReplayLlm;
  before(async () => {
    llm = await startReplayLlm({ server: 'vllm', setup: { contextWindow: 2048 } });
  });
  after(async () => llm?.close());

  for (const failureMode of ['reply', 'http']) {
    it(`answers 400 context_length_exceeded with llm.failure_mode ${failureMode}, streamed or not, and stores no failure text as a reply`, async () => {
      // A window set larger than the model's: the server is the one that refuses.
      const harness = await startTestService({ env: { LLM_BASE_URL: llm.url, LLM_CONTEXT_WINDOW: '1000000', LLM_FAILURE_MODE: failureMode } });
      try {
        const huge = Array.from({ length: 3000 }, (_, index) => `w${index}`).join(' ');
        for (const stream of [false, true]) {
          const session = `too-long-${failureMode}-${stream}`;
          const error = await harness.client.chat.completions
            .create({ model: 'svc-agent', stream, messages: [{ role: 'user', content: huge }] }, { headers: { 'X-Session-ID': session } })
            .catch((caught: unknown) => caught);
          expect(error, `stream: ${stream}`).to.be.instanceOf(OpenAI.BadRequestError);
          const refused = error as InstanceType<typeof OpenAI.BadRequestError>;
          expect(refused.code).to.equal('context_length_exceeded');
          expect(refused.message).to.include("This model's maximum context length is 2048 tokens");
          // The user's message is kept; no failure text was stored as the assistant's reply.
          expect(await storedTranscript(harness.service.database, session)).to.deep.equal([`user: ${huge}`]);
        }
      } finally {
        await harness.close();
      }
    });
  }
});

describe('the service in front of a model that loops', () => {
  let harness: TestService | undefined;
  let llm: ReplayLlm | undefined;
  after(async () => {
    await harness?.close();
    await llm?.close();
  });

  it('cuts a reply far longer than max_tokens allows, marks it length, and stores and sends back only what it kept', async () => {
    llm = await startReplayLlm({ server: 'sglang', setup: { piece: 4096 } });
    // About 1 MB of repetition: the server kept generating past what max_tokens should have allowed.
    llm.script({ match: { lastUserIncludes: 'Loop' }, turn: { content: 'again and '.repeat(100_000) } });
    harness = await startTestService({ env: { LLM_BASE_URL: llm.url } });
    const session = { headers: { 'X-Session-ID': 'looping' } };
    const reply = await harness.client.chat.completions.create({ model: 'svc-agent', max_tokens: 64, messages: [{ role: 'user', content: 'Loop, please' }] }, session);
    expect(reply.choices[0]!.finish_reason).to.equal('length');
    const kept = reply.choices[0]!.message.content!;
    expect(kept.length).to.equal(64 * 16);
    expect(kept.startsWith('again and again')).to.equal(true);
    await harness.client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: 'Thanks' }] }, session);
    expect(lastContextText(llm).length).to.be.lessThan(64 * 16 + 2000);
  });
});

describe('the token budgets in front of a server that streams no usage', () => {
  let harness: TestService | undefined;
  let llm: ReplayLlm | undefined;
  after(async () => {
    await harness?.close();
    await llm?.close();
  });

  it("counts Ollama 0.4's streamed calls, which report no usage, with the service's estimate: the figures /v1/usage shows, and the budget refuses past them", async () => {
    // test/fixtures/llm-servers/ollama-0-4.ts: v0.4.6 reads no stream_options, so a stream has no usage chunk.
    llm = await startReplayLlm({ server: 'ollama-0.4' });
    harness = await startTestService({ env: { LLM_BASE_URL: llm.url, BUDGETS_TOKENS_PER_DAY: '1', API_KEYS: 'admin-key' } });
    const client = new OpenAI({ baseURL: harness.baseURL, apiKey: 'admin-key', maxRetries: 0 });
    const asUser = { headers: { 'X-User-ID': 'ollama-user' } };
    const stream = await client.chat.completions.create({ model: 'svc-agent', stream: true, messages: [{ role: 'user', content: 'Count me, please' }] }, asUser);
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).to.equal('Echo: Count me, please');
    const usage = (await (await fetch(`${harness.baseURL}/usage?user_id=ollama-user`, { headers: { Authorization: 'Bearer admin-key' } })).json()) as {
      total_tokens: number;
      budgets: Array<{ budget: string; used: number; remaining: number }>;
    };
    expect(usage.total_tokens).to.be.greaterThan(0);
    expect(usage.budgets).to.deep.equal([{ ...usage.budgets[0], budget: 'tokens_per_day', used: usage.total_tokens, remaining: 0 }]);
    const calls = chatBodies(llm).length;
    const refused = await client.chat.completions.create({ model: 'svc-agent', stream: true, messages: [{ role: 'user', content: 'Once more' }] }, asUser).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).to.be.instanceOf(OpenAI.RateLimitError);
    expect((refused as InstanceType<typeof OpenAI.RateLimitError>).code).to.equal('insufficient_quota');
    expect(chatBodies(llm)).to.have.length(calls);
  });
});
