import { expect } from 'chai';
import type OpenAI from 'openai';
import { expectSchema } from '../../support/openai-schema.js';
import { startTestService, type TestService } from '../../support/service-harness.js';

const weatherTool: OpenAI.Chat.ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

describe('client-side tools', () => {
  let harness: TestService;

  before(async () => {
    harness = await startTestService();
  });
  after(async () => harness?.close());
  beforeEach(() => harness.llm.reset());

  it('returns the model tool calls to the client and continues from its tool results', async () => {
    harness.llm.script({ match: { lastUserIncludes: 'Paris' }, reply: { toolCalls: [{ id: 'call_w1', name: 'get_weather', arguments: { city: 'Paris' } }] }, times: 1 });
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
    const first = await harness.client.chat.completions.create({ model: 'svc-agent', messages, tools: [weatherTool] });
    expectSchema('CreateChatCompletionResponse', first);
    const choice = first.choices[0]!;
    expect(choice.finish_reason).to.equal('tool_calls');
    expect(choice.message.content).to.equal(null);
    expect(choice.message.tool_calls).to.deep.equal([
      { id: 'call_w1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
    ]);
    expect(harness.llm.requests.at(-1)!.body.tools).to.deep.equal([weatherTool]);

    messages.push(choice.message as OpenAI.Chat.ChatCompletionMessageParam, { role: 'tool', tool_call_id: 'call_w1', content: 'sunny, 21°C' });
    const second = await harness.client.chat.completions.create({ model: 'svc-agent', messages, tools: [weatherTool] });
    expect(second.choices[0]!.message.content).to.equal('Tool result: sunny, 21°C');
    const sent = harness.llm.requests.at(-1)!.body.messages!;
    expect(sent.map((message) => message.role)).to.deep.equal(['system', 'user', 'assistant', 'tool']);
    expect(sent[2]!.tool_calls).to.have.length(1);
  });

  it('continues from tool results sent alone with X-Session-ID: the LLM gets the calls they answer before them, and only those', async () => {
    const calls = [
      { id: 'call_o1', name: 'get_weather', arguments: { city: 'Oslo' } },
      { id: 'call_o2', name: 'get_weather', arguments: { city: 'Bergen' } },
    ];
    harness.llm.script({ match: { lastUserIncludes: 'Oslo and Bergen' }, reply: { content: 'Checking both.', toolCalls: calls }, times: 1 });
    const first = await harness.client.chat.completions
      .create({ model: 'svc-agent', messages: [{ role: 'user', content: 'Weather in Oslo and Bergen?' }], tools: [weatherTool] })
      .withResponse();
    const sessionId = first.response.headers.get('x-session-id')!;
    expect(first.data.choices[0]!.message.tool_calls).to.have.length(2);

    const results: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: 'tool', tool_call_id: 'call_o1', content: 'rain' },
      { role: 'tool', tool_call_id: 'call_o2', content: 'snow' },
    ];
    const second = await harness.client.chat.completions.create({ model: 'svc-agent', messages: results, tools: [weatherTool] }, { headers: { 'X-Session-ID': sessionId } });
    expect(second.choices[0]!.message.content).to.equal('Tool result: rain\nsnow');
    const sent = harness.llm.requests.at(-1)!.body.messages!.slice(1);
    expect(sent.map((message) => message.role)).to.deep.equal(['user', 'assistant', 'tool', 'tool']);
    expect(sent[1]).to.deep.include({ content: 'Checking both.' });
    expect(sent[1]!.tool_calls).to.deep.equal([
      { id: 'call_o1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
      { id: 'call_o2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Bergen"}' } },
    ]);

    // A later turn's context keeps the dialogue only: the calls do not come back.
    await harness.client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: 'Thanks' }] }, { headers: { 'X-Session-ID': sessionId } });
    const later = harness.llm.requests.at(-1)!.body.messages!.slice(1);
    expect(later.map((message) => message.role)).to.deep.equal(['user', 'assistant', 'assistant', 'user']);
    expect(later.every((message) => message.tool_calls === undefined)).to.equal(true);
  });

  it('streams tool-call deltas with index, id, type, name and argument pieces, then finish_reason tool_calls', async () => {
    harness.llm.script({ reply: { toolCalls: [{ id: 'call_s1', name: 'get_weather', arguments: { city: 'Oslo' } }] }, times: 1 });
    const stream = await harness.client.chat.completions.create({
      model: 'svc-agent',
      messages: [{ role: 'user', content: 'Weather in Oslo?' }],
      tools: [weatherTool],
      stream: true,
    });
    const deltas = [];
    let finishReason: string | null = null;
    for await (const chunk of stream) {
      expectSchema('CreateChatCompletionStreamResponse', chunk);
      const choice = chunk.choices[0];
      if (!choice) continue;
      deltas.push(...(choice.delta.tool_calls ?? []));
      if (choice.finish_reason) finishReason = choice.finish_reason;
    }
    expect(finishReason).to.equal('tool_calls');
    expect(deltas[0]).to.deep.include({ index: 0, id: 'call_s1', type: 'function' });
    expect(deltas[0]!.function!.name).to.equal('get_weather');
    const argumentsText = deltas.map((delta) => delta.function?.arguments ?? '').join('');
    expect(JSON.parse(argumentsText)).to.deep.equal({ city: 'Oslo' });
    expect(deltas.every((delta) => delta.index === 0)).to.equal(true);
  });

  it('answers a request ending with tool results when it offers no tools, as OpenAI does (an agent handed over to one without tools)', async () => {
    const response = await fetch(`${harness.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        messages: [
          { role: 'user', content: 'x' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'c', content: 'r' },
        ],
      }),
    });
    expect(response.status).to.equal(200);
    expectSchema('CreateChatCompletionResponse', await response.json());
    // The model was given the context ending in the tool's result.
    const sent = harness.llm.requests.at(-1)!.body.messages!;
    expect(sent.at(-1)).to.deep.include({ role: 'tool', tool_call_id: 'c', content: 'r' });
  });
});
