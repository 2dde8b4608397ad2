import { expect } from 'chai';
import winston from 'winston';
import Transport from 'winston-transport';
import { loadConfig } from '../../../config/load-config.js';
import { startService, type RunningService } from '../../../gateway/server/service.js';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { readText } from '../../support/service-harness.js';

/** The tools Codex CLI and other Responses API clients offer, of types the service does not run, in the order sent. */
const HOSTED_TOOLS = [
  { type: 'web_search' },
  { type: 'namespace', name: 'codex_apps', description: 'Connected apps', tools: [{ type: 'function', name: 'calendar_list', parameters: { type: 'object', properties: {} } }] },
  { type: 'local_shell' },
  { type: 'file_search', vector_store_ids: ['vs_1'] },
  { type: 'code_interpreter', container: { type: 'auto' } },
  { type: 'computer_use_preview', display_width: 1024, display_height: 768, environment: 'browser' },
  { type: 'image_generation' },
  { type: 'mcp', server_label: 'docs', server_url: 'https://mcp.example.com/sse' },
  { type: 'custom', name: 'apply_patch', description: 'Apply a patch', format: { type: 'grammar', syntax: 'lark', definition: 'start: "x"' } },
  { type: 'web_search' },
];
const IGNORED_HEADER = 'web_search, namespace, local_shell, file_search, code_interpreter, computer_use_preview, image_generation, mcp, custom';
const SHELL_TOOL = { type: 'function', name: 'shell', description: 'Run a command', parameters: { type: 'object', properties: { command: { type: 'string' } } } };

/** Keeps the log entries the service writes. */
class Captured extends Transport {
  readonly entries: Array<Record<string, unknown> & { level: string; message: string }> = [];
  override log(info: Record<string, unknown> & { level: string; message: string }, next: () => void): void {
    this.entries.push(info);
    next();
  }
}

describe('tools of types the service does not run (Codex CLI, hosted OpenAI tools)', () => {
  let llm: FakeLlm;
  let service: RunningService;
  let baseURL: string;
  const logs = new Captured();

  before(async () => {
    llm = await startFakeLlm();
    const config = loadConfig({ APP_HOST: '127.0.0.1', APP_PORT: '0', LLM_BASE_URL: llm.url, DATA_DIR: 'memory://', LIMITS_REQUESTS_PER_MINUTE: '0', LIMITS_CONCURRENT_REQUESTS: '0' });
    service = await startService(config, winston.createLogger({ level: 'info', transports: [logs] }));
    await service.started;
    baseURL = `${service.url}/v1`;
  });
  after(async () => {
    await service?.close();
    await llm?.close();
  });
  beforeEach(() => {
    llm.reset();
    logs.entries.length = 0;
  });

  function post(path: string, body: unknown): Promise<Response> {
    return fetch(`${baseURL}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  }

  /** The names of the tools the LLM was offered in its last chat request. */
  function offeredNames(): string[] {
    const request = [...llm.requests].reverse().find((candidate) => candidate.kind === 'chat')!;
    return (request.body.tools ?? []).map((tool) => (tool as { function: { name: string } }).function.name);
  }

  describe('POST /v1/responses', () => {
    it('leaves them out of what the model sees, names their types in X-Ignored-Tools and logs them, and runs the turn', async () => {
      const response = await post('/responses', { model: 'svc-agent', input: 'hello', tools: [...HOSTED_TOOLS, SHELL_TOOL] });
      const body = (await response.json()) as { status: string; output: Array<{ type: string; content?: Array<{ text: string }> }>; tools: Array<{ type: string }> };
      expect(response.status, JSON.stringify(body)).to.equal(200);
      expect(response.headers.get('x-ignored-tools')).to.equal(IGNORED_HEADER);
      expect(body.status).to.equal('completed');
      expect(body.output.at(-1)!.content![0]!.text).to.equal('Echo: hello');
      expect(offeredNames()).to.deep.equal(['shell']);
      const line = logs.entries.find((entry) => entry.level === 'info' && /ignored/i.test(entry.message));
      expect(line, JSON.stringify(logs.entries.map((entry) => entry.message))).to.not.equal(undefined);
      expect(line!.ignoredTools).to.deep.equal(IGNORED_HEADER.split(', '));
    });

    it('sends X-Ignored-Tools with a streamed response too', async () => {
      const response = await post('/responses', { input: 'hello', stream: true, tools: [{ type: 'web_search' }] });
      expect(response.status).to.equal(200);
      expect(response.headers.get('x-ignored-tools')).to.equal('web_search');
      expect(await readText(response)).to.include('response.completed');
    });

    it('sends no X-Ignored-Tools when every tool is a function', async () => {
      const response = await post('/responses', { input: 'hello', tools: [SHELL_TOOL] });
      expect(response.status).to.equal(200);
      expect(response.headers.has('x-ignored-tools')).to.equal(false);
    });

    it('still answers 400 naming a tool that is not an object, or an object that is no tool, at its own index', async () => {
      const cases: Array<[unknown[], string]> = [
        [[{ type: 'web_search' }, 'web_search'], 'tools[1]'],
        [[{ type: 'web_search' }, 42], 'tools[1]'],
        [[{ type: 'web_search' }, { name: 'no_type' }], 'tools[1].type'],
        [[{ type: 'web_search' }, { ...SHELL_TOOL, name: 'bad name' }], 'tools[1].name'],
      ];
      for (const [tools, param] of cases) {
        const response = await post('/responses', { input: 'hello', tools });
        const body = (await response.json()) as { error: { type: string; param: string } };
        expect(response.status, JSON.stringify(tools)).to.equal(400);
        expect(body.error).to.include({ type: 'invalid_request_error', param });
      }
      expect(llm.requests).to.have.length(0);
    });
  });

  describe('POST /v1/chat/completions', () => {
    it('leaves out tools whose type is not function, naming them in X-Ignored-Tools', async () => {
      const tools = [
        { type: 'custom', custom: { name: 'apply_patch', description: 'Apply a patch' } },
        { type: 'function', function: { name: 'shell', parameters: { type: 'object', properties: {} } } },
      ];
      const response = await post('/chat/completions', { messages: [{ role: 'user', content: 'hello' }], tools });
      const body = (await response.json()) as { choices: Array<{ message: { content: string } }> };
      expect(response.status, JSON.stringify(body)).to.equal(200);
      expect(response.headers.get('x-ignored-tools')).to.equal('custom');
      expect(body.choices[0]!.message.content).to.equal('Echo: hello');
      expect(offeredNames()).to.deep.equal(['shell']);
    });

    it('still answers 400 to a tool that is not an object', async () => {
      const response = await post('/chat/completions', { messages: [{ role: 'user', content: 'hello' }], tools: [{ type: 'custom' }, 'shell'] });
      expect(response.status).to.equal(400);
      expect(((await response.json()) as { error: { param: string } }).error.param).to.equal('tools[1]');
    });
  });
});
