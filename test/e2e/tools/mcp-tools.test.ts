import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type OpenAI from 'openai';
import { readText, sseData, startTestService, type TestService } from '../../support/service-harness.js';
import { EVERYTHING_STDIO_YAML, mcpDeploymentFile, startEverythingHttp, type EverythingHttp } from '../../support/mcp-fixtures.js';

const weatherTool: OpenAI.Chat.ChatCompletionTool = {
  type: 'function',
  function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
};

const SUM_REQUEST = 'Add them up [[tool:everything__get-sum {"a":2,"b":3}]]';

const transports: Array<{ name: string; servers(): Promise<{ yaml: string; stop(): Promise<void> }> }> = [
  {
    name: 'stdio',
    servers: async () => ({
      yaml: EVERYTHING_STDIO_YAML,
      stop: async () => {},
    }),
  },
  {
    name: 'streamable HTTP',
    servers: async () => {
      const server: EverythingHttp = await startEverythingHttp();
      return { yaml: `  everything:\n    transport: http\n    url: ${server.url}\n`, stop: () => server.stop() };
    },
  },
];

for (const transport of transports) {
  describe(`MCP tools through the service (${transport.name})`, () => {
    let folder: string;
    let harness: TestService;
    let servers: { yaml: string; stop(): Promise<void> };

    before(async () => {
      folder = mkdtempSync(join(tmpdir(), 'svc-mcp-'));
      servers = await transport.servers();
      harness = await startTestService({ env: { CONFIG_FILE: mcpDeploymentFile(folder, servers.yaml), TOOLS_HEARTBEAT_MS: '100' } });
    });
    after(async () => {
      await harness?.close();
      await servers?.stop();
      rmSync(folder, { recursive: true, force: true });
    });
    beforeEach(() => harness.llm.reset());

    it('offers the server tools to the LLM and describes them in the system prompt', async () => {
      await harness.client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: 'hi' }] });
      const body = harness.llm.requests.at(-1)!.body;
      const names = (body.tools ?? []).map((tool) => (tool as { function: { name: string } }).function.name);
      expect(names).to.include('everything__get-sum');
      const system = String(body.messages![0]!.content);
      expect(system.startsWith('You are a helpful assistant.')).to.equal(true);
      expect(system).to.include('everything__get-sum');
      expect(system).to.match(/"a"/);
    });

    it('answers with the tool result when the model calls a tool (not streaming)', async () => {
      const completion = await harness.client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: SUM_REQUEST }] });
      expect(completion.choices[0]!.finish_reason).to.equal('stop');
      expect(completion.choices[0]!.message.content).to.match(/^Tool result: .*\b5\b/);
      const chatCalls = harness.llm.requests.filter((request) => request.kind === 'chat');
      expect(chatCalls).to.have.length(2);
      const toolMessage = chatCalls[1]!.body.messages!.find((message) => message.role === 'tool');
      expect(String(toolMessage!.content)).to.match(/\b5\b/);
    });

    it('streams the answer after the tool ran (streaming)', async () => {
      const response = await fetch(`${harness.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: SUM_REQUEST }], stream: true }),
      });
      const events = sseData(await readText(response));
      expect(events.at(-1)).to.equal('[DONE]');
      const text = events
        .slice(0, -1)
        .map((event) => JSON.parse(event).choices[0]?.delta.content ?? '')
        .join('');
      expect(text).to.match(/^Tool result: .*\b5\b/);
    });

    for (const stream of [false, true]) {
      it(`runs the service's tools first when one reply calls both kinds, then returns the client's call alone (${stream ? 'streaming' : 'not streaming'})`, async () => {
        const sum = { id: 'call_sum', name: 'everything__get-sum', arguments: { a: 2, b: 3 } };
        const weather = { id: 'call_weather', name: 'get_weather', arguments: { city: 'Paris' } };
        harness.llm.script(
          { match: { lastUserIncludes: 'both kinds', hasToolResults: false }, reply: { toolCalls: [sum, weather] }, times: 1 },
          { match: { lastUserIncludes: 'both kinds', hasToolResults: true }, reply: { toolCalls: [{ ...weather, id: 'call_weather_2' }] }, times: 1 },
        );
        const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Use both kinds of tools' }];
        const calls: Array<{ index: number; id?: string; name?: string; arguments: string }> = [];
        let finishReason: string | null = null;
        if (stream) {
          for await (const chunk of await harness.client.chat.completions.create({ model: 'svc-agent', messages, tools: [weatherTool], stream: true })) {
            const choice = chunk.choices[0];
            for (const delta of choice?.delta.tool_calls ?? []) {
              const call = (calls[delta.index] ??= { index: delta.index, arguments: '' });
              call.id ??= delta.id;
              call.name ??= delta.function?.name;
              call.arguments += delta.function?.arguments ?? '';
            }
            finishReason = choice?.finish_reason ?? finishReason;
          }
        } else {
          const choice = (await harness.client.chat.completions.create({ model: 'svc-agent', messages, tools: [weatherTool] })).choices[0]!;
          finishReason = choice.finish_reason;
          for (const [index, call] of (choice.message.tool_calls ?? []).entries()) {
            if (call.type === 'function') calls.push({ index, id: call.id, name: call.function.name, arguments: call.function.arguments });
          }
        }

        expect(finishReason).to.equal('tool_calls');
        expect(calls).to.deep.equal([{ index: 0, id: 'call_weather_2', name: 'get_weather', arguments: '{"city":"Paris"}' }]);
        const chatCalls = harness.llm.requests.filter((request) => request.kind === 'chat');
        expect(chatCalls).to.have.length(2);
        const [assistant, toolResult] = chatCalls[1]!.body.messages!.slice(-2);
        expect((assistant!.tool_calls as Array<{ id: string }>).map((call) => call.id)).to.deep.equal(['call_sum']);
        expect(toolResult).to.deep.include({ role: 'tool', tool_call_id: 'call_sum' });
        expect(String(toolResult!.content)).to.match(/\b5\b/);
      });
    }

    it('keeps the stream open with comment lines while a slow tool runs', async () => {
      const request = 'Wait [[tool:everything__trigger-long-running-operation {"duration":1,"steps":2}]]';
      const response = await fetch(`${harness.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: request }], stream: true }),
      });
      const body = await readText(response);
      expect(body).to.match(/^: keep-alive\n\n/m);
      expect(body.indexOf(': keep-alive')).to.be.lessThan(body.indexOf('"finish_reason":"stop"'));
      expect(body.endsWith('data: [DONE]\n\n')).to.equal(true);
    });

    it('stores the tool call and its result in the transcript, apart from the context roles', async () => {
      const response = await fetch(`${harness.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: SUM_REQUEST }] }),
      });
      const sessionId = response.headers.get('x-session-id')!;
      const rows = await harness.service.database.db.selectFrom('conversations').select(['role', 'message']).where('session_id', '=', sessionId).orderBy('id').execute();
      expect(rows.map((row) => row.role)).to.deep.equal(['user', 'tool_call', 'tool', 'assistant']);
      expect(JSON.parse(rows[1]!.message)).to.include({ name: 'everything__get-sum' });
    });

    it('reports the server as connected in /health', async () => {
      const health = (await (await fetch(`${harness.service.url}/health`)).json()) as { mcp_servers: Record<string, { status: string; tools: number }> };
      expect(health.mcp_servers.everything!.status).to.equal('connected');
      expect(health.mcp_servers.everything!.tools).to.be.greaterThan(5);
    });
  });
}

describe('MCP tools: a server that cannot start', () => {
  let folder: string;
  let harness: TestService;

  before(async () => {
    folder = mkdtempSync(join(tmpdir(), 'svc-mcp-'));
    const yaml = `  broken:\n    transport: stdio\n    command: /nonexistent/mcp-server\n`;
    harness = await startTestService({ env: { CONFIG_FILE: mcpDeploymentFile(folder, yaml) } });
  });
  after(async () => {
    await harness?.close();
    rmSync(folder, { recursive: true, force: true });
  });

  it('keeps the service answering and reports the server as failed in /health', async () => {
    const completion = await harness.client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: 'still there?' }] });
    expect(completion.choices[0]!.message.content).to.equal('Echo: still there?');
    const health = (await (await fetch(`${harness.service.url}/health`)).json()) as { status: string; mcp_servers: Record<string, { status: string }> };
    expect(health.status).to.equal('ok');
    expect(['failed', 'connecting']).to.include(health.mcp_servers.broken!.status);
  });
});
