import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, OpenAIProvider, Runner, tool } from '@openai/agents';
import { expect } from 'chai';
import OpenAI from 'openai';
import { z } from 'zod';
import { freePort, startChild, type RunningChild } from '../../../scripts/bench/child-process.js';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { EVERYTHING_STDIO_YAML, mcpDeploymentFile } from '../../support/mcp-fixtures.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const API_KEY = 'sk-agents-sdk-test';

/** A GET of the service's own API, with the key. */
async function getJson<T>(url: string): Promise<T> {
  const response = await fetch(url, { headers: { Authorization: `Bearer ${API_KEY}` } });
  expect(response.status, url).to.equal(200);
  return (await response.json()) as T;
}

/** The roles and texts of the LLM's last chat request, after the system prompt. */
function lastDialogue(llm: FakeLlm): Array<{ role: string; content: string }> {
  const request = [...llm.requests].reverse().find((candidate) => candidate.kind === 'chat')!;
  return request.body.messages!.filter((message) => message.role !== 'system').map((message) => ({ role: message.role, content: String(message.content ?? '') }));
}

/** The Responses API items a run produced, as the Agents SDK reports them: their item type and raw type. */
function itemKinds(result: { newItems: ReadonlyArray<{ type: string; rawItem: unknown }> }): string[] {
  return result.newItems.map((item) => {
    const raw = item.rawItem as { type: string; name?: string };
    return `${item.type}:${raw.type === 'hosted_tool_call' ? raw.name : raw.type}`;
  });
}

describe('the OpenAI Agents SDK against the service (npm start, embedded database)', function () {
  this.timeout(120_000);
  let folder: string;
  let llm: FakeLlm;
  let service: RunningChild;
  let runner: Runner;
  let origin: string;
  const weatherCalls: string[] = [];

  const getWeather = tool({
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      weatherCalls.push(city);
      return `Sunny in ${city}`;
    },
  });
  const agent = new Agent({ name: 'Assistant', instructions: 'Answer briefly.', model: 'svc-agent', tools: [getWeather] });

  before(async () => {
    folder = mkdtempSync(join(tmpdir(), 'svc-agents-sdk-'));
    llm = await startFakeLlm();
    const port = await freePort();
    service = await startChild({
      name: 'service',
      script: 'gateway/server/main.ts',
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        DB_URL: '',
        API_KEYS: API_KEY,
        APP_PORT: String(port),
        DATA_DIR: join(folder, 'data'),
        LLM_BASE_URL: llm.url,
        CONFIG_FILE: mcpDeploymentFile(folder, EVERYTHING_STDIO_YAML),
        LOG_LEVEL: 'info',
      },
      ready: { line: /svc-agent listening on (\S+)/ },
    });
    origin = `http://127.0.0.1:${port}`;
    const provider = new OpenAIProvider({ baseURL: `${origin}/v1`, apiKey: API_KEY, useResponses: true });
    runner = new Runner({ modelProvider: provider, tracingDisabled: true });
  });
  after(async () => {
    await service?.stop(5_000);
    await llm?.close();
    rmSync(folder, { recursive: true, force: true });
  });
  beforeEach(() => {
    llm.reset();
    weatherCalls.length = 0;
  });

  it('runs an agent with a local function tool, then continues it with previousResponseId in the same session', async () => {
    llm.script({ match: { lastUserIncludes: 'weather in Paris', hasToolResults: false }, reply: { toolCalls: [{ name: 'get_weather', arguments: { city: 'Paris' } }] }, times: 1 });
    const first = await runner.run(agent, 'What is the weather in Paris?');
    expect(weatherCalls).to.deep.equal(['Paris']);
    expect(first.finalOutput).to.equal('Tool result: Sunny in Paris');
    expect(itemKinds(first)).to.deep.equal(['tool_call_item:function_call', 'tool_call_output_item:function_call_result', 'message_output_item:message']);
    expect(first.lastResponseId).to.match(/^resp_/);

    const second = await runner.run(agent, 'Thanks! And in Rome?', { previousResponseId: first.lastResponseId! });
    expect(second.finalOutput).to.equal('Echo: Thanks! And in Rome?');
    // The service kept the first run: the LLM sees its dialogue (tool activity stays out of a context) without the SDK sending it again,
    // and without the empty reply of the round that called the tool, which chat templates refuse before another assistant message.
    expect(lastDialogue(llm)).to.deep.equal([
      { role: 'user', content: 'What is the weather in Paris?' },
      { role: 'assistant', content: 'Tool result: Sunny in Paris' },
      { role: 'user', content: 'Thanks! And in Rome?' },
    ]);

    // One session holds both runs, and the agents API and the inspector show it.
    const agents = await getJson<{ data: Array<{ id: string }> }>(`${origin}/v1/agents`);
    expect(agents.data).to.have.length(1);
    const sessionId = agents.data[0]!.id;
    const transcript = await getJson<{ data: Array<{ role: string; content: string }> }>(`${origin}/v1/agents/${sessionId}/messages?limit=100`);
    expect(transcript.data.map((entry) => entry.role)).to.deep.equal(['user', 'tool_call', 'assistant', 'tool', 'assistant', 'user', 'assistant']);
    const inspected = await getJson<unknown>(`${origin}/inspect/sessions`);
    expect(JSON.stringify(inspected)).to.include(sessionId);
  });

  it('continues an agent by conversationId, its local tool answered inside the conversation', async () => {
    const client = new OpenAI({ baseURL: `${origin}/v1`, apiKey: API_KEY, maxRetries: 0 });
    const { id } = await client.conversations.create({ metadata: { topic: 'weather' } });
    llm.script({ match: { lastUserIncludes: 'weather in Oslo', hasToolResults: false }, reply: { toolCalls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] }, times: 1 });
    const first = await runner.run(agent, 'What is the weather in Oslo?', { conversationId: id });
    expect(weatherCalls).to.deep.equal(['Oslo']);
    expect(first.finalOutput).to.equal('Tool result: Sunny in Oslo');
    // The SDK answered the call with only its output, naming the conversation: the LLM still saw the call first.
    const answered = [...llm.requests].reverse().find((request) => request.kind === 'chat' && request.body.messages!.some((message) => message.role === 'tool'))!;
    const [call, result] = answered.body.messages!.slice(-2);
    expect((call!.tool_calls as Array<{ function: { name: string } }>).map((entry) => entry.function.name)).to.deep.equal(['get_weather']);
    expect(result).to.deep.include({ role: 'tool', content: 'Sunny in Oslo' });

    const second = await runner.run(agent, 'Thanks!', { conversationId: id });
    expect(second.finalOutput).to.equal('Echo: Thanks!');
    expect(lastDialogue(llm).map((message) => message.content)).to.deep.equal(['What is the weather in Oslo?', 'Tool result: Sunny in Oslo', 'Thanks!']);
    const items = await client.conversations.items.list(id, { order: 'asc' });
    expect(items.data.map((item) => (item.type === 'message' ? item.role : item.type))).to.deep.equal([
      'user',
      'function_call',
      'assistant',
      'function_call_output',
      'assistant',
      'user',
      'assistant',
    ]);
  });

  it("shows the service's MCP tool calls in the run's items, next to the agent's own tool", async () => {
    const result = await runner.run(agent, 'Add them up [[tool:everything__get-sum {"a":2,"b":3}]]');
    expect(itemKinds(result)).to.deep.equal(['tool_call_item:mcp_call', 'message_output_item:message']);
    const call = result.newItems[0]!.rawItem as unknown as { providerData: { server_label: string; name: string; output?: string } };
    expect(call.providerData).to.include({ server_label: 'everything', name: 'get-sum' });
    expect(result.finalOutput).to.match(/^Tool result: .*\b5\b/);
    expect(weatherCalls).to.deep.equal([]);
  });

  it('hands off from a triage agent to a specialist that has no tools, and the specialist answers', async () => {
    const refunds = new Agent({ name: 'Refunds', instructions: 'Handle refunds.', model: 'svc-agent' });
    const triage = Agent.create({ name: 'Triage', instructions: 'Route the user.', model: 'svc-agent', handoffs: [refunds] });
    llm.script({ match: { lastUserIncludes: 'refund', hasToolResults: false }, reply: { toolCalls: [{ name: 'transfer_to_Refunds', arguments: {} }] }, times: 1 });
    const result = await runner.run(triage, 'I would like a refund');
    expect(result.lastAgent?.name).to.equal('Refunds');
    // The scripted LLM answers the user after a hand-off: the specialist's reply reached the SDK.
    expect(result.finalOutput).to.equal('Echo: I would like a refund');
    expect(itemKinds(result)).to.deep.equal(['handoff_call_item:function_call', 'handoff_output_item:function_call_result', 'message_output_item:message']);
    // The specialist's request offered no tools of the client's and ended in the hand-off's output.
    const specialist = [...llm.requests].reverse().find((request) => request.kind === 'chat')!;
    expect(specialist.body.messages!.at(-1)).to.include({ role: 'tool' });
    expect((specialist.body.tools ?? []).map((tool) => (tool as { function: { name: string } }).function.name)).to.not.include('transfer_to_Refunds');
  });
});
