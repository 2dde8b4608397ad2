import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type OpenAI from 'openai';
import { EVERYTHING_STDIO_YAML, mcpDeploymentFile } from '../../support/mcp-fixtures.js';
import { expectSchema } from '../../support/openai-schema.js';
import { startTestService, type TestService } from '../../support/service-harness.js';

type McpCall = OpenAI.Responses.ResponseOutputItem.McpCall;

/** A failed call's error as OpenAI's schema 2.3.0 has it (the SDK's types still say text). */
type McpCallError = { type: string; content: Array<{ type: string; text: string }> };

const SUM_REQUEST = 'Add them up [[tool:everything__get-sum {"a":2,"b":3}]]';
const sum = { id: 'call_sum', name: 'everything__get-sum', arguments: { a: 2, b: 3 } };
const weatherTool: OpenAI.Responses.FunctionTool = {
  type: 'function',
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
  strict: false,
};

describe('the Responses API with the service MCP tools', () => {
  let folder: string;
  let harness: TestService;
  let client: OpenAI;

  before(async () => {
    folder = mkdtempSync(join(tmpdir(), 'svc-responses-mcp-'));
    harness = await startTestService({ env: { CONFIG_FILE: mcpDeploymentFile(folder, EVERYTHING_STDIO_YAML) } });
    client = harness.client;
  });
  after(async () => {
    await harness?.close();
    rmSync(folder, { recursive: true, force: true });
  });
  beforeEach(() => harness.llm.reset());

  /** The session a stored response belongs to. */
  async function sessionOf(responseId: string): Promise<string> {
    const row = await harness.service.database.db.selectFrom('responses').select('session_id').where('id', '=', responseId).executeTakeFirstOrThrow();
    return row.session_id;
  }

  it('shows each call of the service tools as an mcp_call item before the message that used its result', async () => {
    const response = await client.responses.create({ model: 'svc-agent', input: SUM_REQUEST });
    expectSchema('Response', response);
    expect(response.status).to.equal('completed');
    expect(response.output.map((item) => item.type)).to.deep.equal(['mcp_call', 'message']);
    const call = response.output[0] as McpCall;
    expect(call.id).to.match(/^mcp_[0-9a-f]{48}$/);
    expect(call).to.include({ type: 'mcp_call', status: 'completed', server_label: 'everything', name: 'get-sum', arguments: '{"a":2,"b":3}', error: null });
    expect(call.output).to.match(/\b5\b/);
    expect(response.output_text).to.match(/^Tool result: .*\b5\b/);
    // What the client was given is what is stored.
    const stored = await client.responses.retrieve(response.id);
    expect(stored.output).to.deep.equal(response.output);
  });

  it('shows a failed call with its error and no output: a tool no server has, and arguments a server refuses', async () => {
    harness.llm.script({
      match: { lastUserIncludes: 'two bad calls', hasToolResults: false },
      reply: { toolCalls: [{ id: 'call_nowhere', name: 'nowhere__tool', arguments: {} }, { id: 'call_bad', name: 'everything__get-sum', arguments: 'not json' }] },
      times: 1,
    });
    const response = await client.responses.create({ model: 'svc-agent', input: 'Make two bad calls' });
    expectSchema('Response', response);
    const calls = response.output.filter((item): item is McpCall => item.type === 'mcp_call');
    expect(calls.map(({ status, server_label, name, output }) => ({ status, server_label, name, output }))).to.deep.equal([
      { status: 'failed', server_label: '', name: 'nowhere__tool', output: null },
      { status: 'failed', server_label: 'everything', name: 'get-sum', output: null },
    ]);
    const errors = calls.map((call) => call.error as unknown as McpCallError);
    expect(errors.map((error) => error.type)).to.deep.equal(['mcp_tool_execution_error', 'mcp_tool_execution_error']);
    expect(errors[0]!.content).to.have.length(1);
    expect(errors[0]!.content[0]!.text).to.match(/no tool named "nowhere__tool"/);
    expect(errors[1]!.content[0]!.text).to.match(/^Error: .*JSON/);
  });

  it('streams a failed call with response.mcp_call.failed and its error in output_item.done', async () => {
    harness.llm.script({ match: { lastUserIncludes: 'stream a bad call', hasToolResults: false }, reply: { toolCalls: [{ id: 'call_none', name: 'nowhere__tool', arguments: {} }] }, times: 1 });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of await client.responses.create({ model: 'svc-agent', input: 'Please stream a bad call', stream: true })) events.push(event);
    for (const event of events) expectSchema('ResponseStreamEvent', event);
    expect(events.map((event) => event.type)).to.include('response.mcp_call.failed');
    const done = events.find((event): event is OpenAI.Responses.ResponseOutputItemDoneEvent => event.type === 'response.output_item.done' && event.item.type === 'mcp_call');
    expect(done!.item).to.include({ status: 'failed', output: null });
    expect((done!.item as McpCall).error).to.deep.include({ type: 'mcp_tool_execution_error' });
  });

  it('keeps the order of a turn: the text before the call, the call, the text after, and output_text is the whole reply', async () => {
    harness.llm.script({ match: { lastUserIncludes: 'explain the sum', hasToolResults: false }, reply: { content: 'Let me add.', toolCalls: [sum] }, times: 1 });
    const response = await client.responses.create({ model: 'svc-agent', input: 'Please explain the sum' });
    expect(response.output.map((item) => item.type)).to.deep.equal(['message', 'mcp_call', 'message']);
    expect(response.output_text).to.match(/^Let me add\.\n\nTool result: .*\b5\b/);
    // The next turn continues the same session, with the reply as one assistant turn of its context.
    const next = await client.responses.create({ model: 'svc-agent', input: 'Thanks', previous_response_id: response.id });
    expect(await sessionOf(next.id)).to.equal(await sessionOf(response.id));
    const context = harness.llm.requests.at(-1)!.body.messages!.slice(1).map((message) => ({ role: message.role, content: String(message.content) }));
    expect(context).to.deep.equal([
      { role: 'user', content: 'Please explain the sum' },
      { role: 'assistant', content: response.output_text },
      { role: 'user', content: 'Thanks' },
    ]);
  });

  it("runs the service's tool and returns the client's call; the client's answer continues the same session", async () => {
    const weather = { id: 'call_weather', name: 'get_weather', arguments: { city: 'Paris' } };
    harness.llm.script(
      { match: { lastUserIncludes: 'both kinds', hasToolResults: false }, reply: { content: 'Checking.', toolCalls: [sum, weather] }, times: 1 },
      { match: { lastUserIncludes: 'both kinds', hasToolResults: true }, reply: { toolCalls: [{ ...weather, id: 'call_weather_2' }] }, times: 1 },
    );
    const first = await client.responses.create({ model: 'svc-agent', input: 'Use both kinds of tools', tools: [weatherTool] });
    expectSchema('Response', first);
    expect(first.output.map((item) => item.type)).to.deep.equal(['message', 'mcp_call', 'function_call']);
    expect(first.output[2]).to.include({ call_id: 'call_weather_2', name: 'get_weather' });

    const second = await client.responses.create({
      model: 'svc-agent',
      previous_response_id: first.id,
      tools: [weatherTool],
      input: [{ type: 'function_call_output', call_id: 'call_weather_2', output: 'Sunny' }],
    });
    expect(second.output_text).to.equal('Tool result: Sunny');
    expect(await sessionOf(second.id)).to.equal(await sessionOf(first.id));
    // The LLM sees its own call of the client's tool and the answer; the service's call stays out of the resent history.
    const [assistant, result] = harness.llm.requests.at(-1)!.body.messages!.slice(-2);
    expect(assistant).to.deep.include({ role: 'assistant', content: 'Checking.' });
    expect((assistant!.tool_calls as Array<{ id: string }>).map((call) => call.id)).to.deep.equal(['call_weather_2']);
    expect(result).to.deep.include({ role: 'tool', tool_call_id: 'call_weather_2', content: 'Sunny' });
  });

  it('streams an mcp_call item with its events, in order, and ends with the response it stores', async () => {
    harness.llm.script({ match: { lastUserIncludes: 'stream the sum', hasToolResults: false }, reply: { content: 'Adding.', toolCalls: [sum] }, times: 1 });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of await client.responses.create({ model: 'svc-agent', input: 'Please stream the sum', stream: true })) events.push(event);
    for (const event of events) expectSchema('ResponseStreamEvent', event);

    expect(events.map((event) => event.sequence_number)).to.deep.equal(events.map((_, index) => index));
    const callEvents = events.filter((event) => 'item_id' in event || 'item' in event).filter((event) => {
      const item = 'item' in event ? (event.item as { type: string }) : undefined;
      return item ? item.type === 'mcp_call' : event.type.startsWith('response.mcp_call');
    });
    expect(callEvents.map((event) => event.type)).to.deep.equal([
      'response.output_item.added',
      'response.mcp_call.in_progress',
      'response.mcp_call_arguments.delta',
      'response.mcp_call_arguments.done',
      'response.mcp_call.completed',
      'response.output_item.done',
    ]);
    // The message before the call is done before the call is added; the text after it is a message of its own.
    const added = events.filter((event): event is OpenAI.Responses.ResponseOutputItemAddedEvent => event.type === 'response.output_item.added');
    expect(added.map((event) => [event.output_index, event.item.type])).to.deep.equal([
      [0, 'message'],
      [1, 'mcp_call'],
      [2, 'message'],
    ]);
    const firstMessageDone = events.findIndex((event) => event.type === 'response.output_item.done' && event.output_index === 0);
    expect(firstMessageDone).to.be.lessThan(events.indexOf(added[1]!));

    const completed = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    expect(completed.type).to.equal('response.completed');
    const doneItems = events.flatMap((event) => (event.type === 'response.output_item.done' ? [event.item] : []));
    expect(completed.response.output).to.deep.equal(doneItems);
    const call = completed.response.output[1] as McpCall;
    expect(call).to.include({ server_label: 'everything', name: 'get-sum', arguments: '{"a":2,"b":3}', status: 'completed' });
    expect((await client.responses.retrieve(completed.response.id)).output).to.deep.equal(completed.response.output);
    const text = events.flatMap((event) => (event.type === 'response.output_text.delta' ? [event.delta] : [])).join('');
    expect(text).to.match(/^Adding\.\n\nTool result: .*\b5\b/);
  });
});
