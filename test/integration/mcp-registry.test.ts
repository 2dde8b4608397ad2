import { expect } from 'chai';
import type { RuntimeEvents } from '../../runtime/observability/event-bus.js';
import type { McpRegistry } from '../../runtime/tools/mcp-registry.js';
import {
  answer,
  callTool,
  everythingStdioConfig,
  startEverythingHttp,
  testRegistry,
  type EverythingHttp,
} from '../support/mcp-fixtures.js';
import { testServerStdioConfig } from '../support/mcp-test-server.js';
import { isProcessAlive, waitFor } from '../support/wait-for.js';

const OPENAI_FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

function functionNames(registry: McpRegistry, allowed?: string[]): string[] {
  return registry.definitions(allowed).map((definition) => (definition.type === 'function' ? definition.function.name : ''));
}

describe('McpRegistry with server-everything over stdio', () => {
  let registry: ReturnType<typeof testRegistry>;

  before(async () => {
    registry = testRegistry({ servers: { everything: everythingStdioConfig() } });
    await registry.start();
  });

  after(() => registry.close());

  it('offers every tool as <server>__<tool> when the server is connected', () => {
    const names = functionNames(registry);
    expect(names).to.include.members(['everything__get-sum', 'everything__echo']);
    for (const name of names) expect(name).to.match(OPENAI_FUNCTION_NAME);
    expect(registry.status().everything).to.include({ status: 'connected', transport: 'stdio', tools: names.length, attempts: 1 });
  });

  it('tells a tool that may run again (MCP annotations readOnlyHint or idempotentHint) from one that may not', () => {
    expect(registry.isRepeatable('everything__get-sum')).to.equal(true);
    expect(registry.isRepeatable('everything__toggle-simulated-logging')).to.equal(false);
    expect(registry.isRepeatable('nowhere__tool')).to.equal(false);
  });

  it('gives each definition the MCP input schema as its parameters when listing', () => {
    const getSum = registry.definitions(['everything__get-sum']);
    expect(getSum).to.have.length(1);
    const definition = getSum[0];
    if (definition?.type !== 'function') throw new Error('expected a function tool');
    expect(definition.function.description).to.equal('Returns the sum of two numbers');
    expect(definition.function.parameters).to.deep.include({ type: 'object', required: ['a', 'b'] });
    expect(definition.function.parameters).to.have.nested.property('properties.a.type', 'number');
  });

  it('returns the sum as text when get-sum is called with a and b', async () => {
    const result = await callTool(registry, 'everything__get-sum', { a: 2, b: 3 });
    expect(result).to.include({ toolCallId: 'call-everything__get-sum', name: 'everything__get-sum', isError: false });
    expect(result.content).to.contain('5');
  });

  it('describes each tool with its name, description and input schema when asked for the prompt section', () => {
    const text = registry.describe();
    expect(text).to.match(/^## Tools/);
    expect(text).to.contain('### everything__get-sum\nReturns the sum of two numbers\nInput schema: {');
    const schemaLine = text.split('\n').find((line, index, lines) => lines[index - 2] === '### everything__get-sum');
    const schema = JSON.parse((schemaLine ?? '').replace('Input schema: ', '')) as { properties: Record<string, { type: string }> };
    expect(schema.properties.a?.type).to.equal('number');
    expect(schema.properties.b?.type).to.equal('number');
  });

  it('narrows the definitions to a state list when given one', () => {
    const all = functionNames(registry);
    expect(functionNames(registry, ['everything__echo'])).to.deep.equal(['everything__echo']);
    expect(functionNames(registry, ['everything__*'])).to.deep.equal(all);
    expect(functionNames(registry, ['everything'])).to.deep.equal(all);
    expect(functionNames(registry, ['other__*'])).to.deep.equal([]);
    expect(functionNames(registry, [])).to.deep.equal([]);
  });

  it('returns an error result naming the problem when the arguments are not valid JSON', async () => {
    const result = await callTool(registry, 'everything__get-sum', '{"a": 2,');
    expect(result.isError).to.equal(true);
    expect(result.content).to.contain('not valid JSON');
  });

  it('returns an error result when the tool is unknown', async () => {
    const result = await callTool(registry, 'everything__no-such-tool', {});
    expect(result).to.include({ isError: true, name: 'everything__no-such-tool' });
    expect(result.content).to.contain('no tool named "everything__no-such-tool"');
  });

  it('keeps the tool error flag when the MCP tool reports an error', async () => {
    const result = await callTool(registry, 'everything__get-sum', { a: 'two', b: 3 });
    expect(result.isError).to.equal(true);
    expect(result.content).to.match(/invalid/i);
    expect(registry.status().everything?.status).to.equal('connected');
  });

  it('summarises non-text parts when a tool returns an image', async () => {
    const result = await callTool(registry, 'everything__get-tiny-image', {});
    expect(result.isError).to.equal(false);
    expect(result.content).to.contain('[image: image/png]');
    expect(result.content).not.to.match(/[A-Za-z0-9+/]{200}/);
  });

  it('emits tool:call with the server, tool, duration and outcome when a tool is called', async () => {
    const seen: Array<RuntimeEvents['tool:call']> = [];
    const off = registry.events.on('tool:call', (event) => seen.push(event));
    await callTool(registry, 'everything__echo', { message: 'hi' }, { sessionId: 'session-events' });
    await callTool(registry, 'everything__get-sum', { a: 'x' }, { sessionId: 'session-events' });
    off();
    expect(seen.map(({ tool, server, outcome, sessionId }) => ({ tool, server, outcome, sessionId }))).to.deep.equal([
      { tool: 'echo', server: 'everything', outcome: 'ok', sessionId: 'session-events' },
      { tool: 'get-sum', server: 'everything', outcome: 'error', sessionId: 'session-events' },
    ]);
    expect(seen[0]?.durationMs).to.be.a('number').and.at.least(0);
  });
});

describe('McpRegistry approvals (require_approval)', () => {
  let registry: ReturnType<typeof testRegistry>;
  const warnings: Array<{ message: string; meta?: Record<string, unknown> }> = [];

  before(async () => {
    const logger = { info: () => {}, error: () => {}, warn: (message: string, meta?: Record<string, unknown>) => warnings.push({ message, meta }) };
    registry = testRegistry({
      servers: {
        listed: { ...everythingStdioConfig(), require_approval: ['get-sum', 'get-summ'] },
        careful: { ...everythingStdioConfig(), require_approval: 'always' },
      },
      logger,
    });
    await registry.start();
  });

  after(() => registry.close());

  it('holds only the listed tools of a server with a list, by their name on the server', () => {
    expect(registry.approvalFor('listed__get-sum')).to.deep.equal({ server: 'listed', tool: 'get-sum' });
    expect(registry.approvalFor('listed__echo')).to.equal(undefined);
  });

  it('holds every tool of a server with always, and nothing for a name no server offers', () => {
    expect(registry.approvalFor('careful__echo')).to.deep.equal({ server: 'careful', tool: 'echo' });
    expect(registry.approvalFor('careful__get-sum')).to.deep.equal({ server: 'careful', tool: 'get-sum' });
    expect(registry.approvalFor('nowhere__tool')).to.equal(undefined);
  });

  it('holds a tool its server runs at once when the caller requires it (a graph tool state), and still nothing for an unknown name', () => {
    expect(registry.approvalFor('listed__echo', true)).to.deep.equal({ server: 'listed', tool: 'echo' });
    expect(registry.approvalFor('nowhere__tool', true)).to.equal(undefined);
  });

  it('warns once of a listed name the server does not offer', () => {
    expect(warnings.filter((warning) => warning.meta?.tool === 'get-summ')).to.deep.equal([
      { message: 'tool server listed: require_approval names get-summ, which the server does not offer', meta: { server: 'listed', tool: 'get-summ' } },
    ]);
    expect(warnings.filter((warning) => warning.meta?.tool === 'get-sum')).to.deep.equal([]);
  });
});

describe('McpRegistry with server-everything over streamable HTTP', () => {
  let server: EverythingHttp;
  let registry: ReturnType<typeof testRegistry>;

  before(async () => {
    server = await startEverythingHttp();
    registry = testRegistry({ servers: { everything: { transport: 'http', url: server.url, headers: {}, per_user: false, require_approval: 'never', idempotent: false } } });
    await registry.start();
  });

  after(async () => {
    await registry.close();
    await server.stop();
  });

  it('lists the tools as <server>__<tool> when the server is connected', () => {
    expect(functionNames(registry)).to.include.members(['everything__get-sum', 'everything__echo']);
    expect(registry.status().everything).to.include({ status: 'connected', transport: 'http' });
  });

  it('returns the sum as text when get-sum is called with a and b', async () => {
    const result = await callTool(registry, 'everything__get-sum', { a: 2, b: 3 });
    expect(result.isError).to.equal(false);
    expect(result.content).to.contain('5');
  });

  it('describes get-sum with its description and schema when asked for the prompt section', () => {
    expect(registry.describe()).to.contain('### everything__get-sum\nReturns the sum of two numbers\nInput schema: {"type":"object"');
  });

  it('returns an error result, marks the server failed and reconnects when the server goes away and comes back', async () => {
    await server.stop();

    const result = await callTool(registry, 'everything__get-sum', { a: 2, b: 3 });

    expect(result.isError).to.equal(true);
    expect(result.content).to.contain('on server everything failed');
    expect(registry.status().everything?.status).to.be.oneOf(['failed', 'connecting']);
    expect(functionNames(registry), 'the last known tools stay offered').to.include('everything__get-sum');
    server = await startEverythingHttp(server.port);
    await waitFor(() => registry.status().everything?.status === 'connected', 'the server to be reconnected');
    expect((await callTool(registry, 'everything__get-sum', { a: 2, b: 3 })).content).to.contain('5');
  });
});

describe('McpRegistry with a misbehaving server', () => {
  let registry: ReturnType<typeof testRegistry>;

  beforeEach(async () => {
    registry = testRegistry({ servers: { test: testServerStdioConfig({ timeout_ms: 400 }) }, callTimeoutMs: 30_000 });
    await registry.start();
    expect(registry.status().test?.status).to.equal('connected');
  });

  afterEach(() => registry.close());

  it('takes every tool of a server configured idempotent as one that may run again; without the setting, a tool with no annotations may not', async () => {
    expect(registry.isRepeatable('test__stats')).to.equal(false);
    const idempotent = testRegistry({ servers: { test: testServerStdioConfig({ idempotent: true }) } });
    await idempotent.start();
    try {
      expect(idempotent.isRepeatable('test__stats')).to.equal(true);
    } finally {
      await idempotent.close();
    }
  });

  it('sends each call an idempotency key in its _meta: the session id and the model’s call id, the same for every attempt', async () => {
    const first = answer<Record<string, unknown>>(await callTool(registry, 'test__request-meta', {}, { sessionId: 'session-7' }));
    const again = answer<Record<string, unknown>>(await callTool(registry, 'test__request-meta', {}, { sessionId: 'session-7' }));
    expect(first).to.deep.include({ 'io.svc-agent/idempotency-key': 'session-7/call-test__request-meta' });
    expect(again['io.svc-agent/idempotency-key']).to.equal(first['io.svc-agent/idempotency-key']);
    const elsewhere = answer<Record<string, unknown>>(await callTool(registry, 'test__request-meta', {}, { sessionId: 'session-8' }));
    expect(elsewhere['io.svc-agent/idempotency-key']).to.equal('session-8/call-test__request-meta');
  });

  it('sanitises a tool name to the OpenAI pattern when it has other characters', async () => {
    expect(functionNames(registry)).to.include('test__dotted_name');
    expect(answer<string>(await callTool(registry, 'test__dotted_name'))).to.equal('dotted');
  });

  it('returns an error result and restarts the server when it crashes mid-call', async () => {
    const { pid: firstPid } = answer<{ pid: number }>(await callTool(registry, 'test__stats'));

    const result = await callTool(registry, 'test__crash');

    expect(result.isError).to.equal(true);
    expect(result.content).to.contain('closed the connection');
    expect(result.content).to.contain('code 3');
    await waitFor(() => !isProcessAlive(firstPid), 'the crashed server to be gone');
    await waitFor(() => registry.status().test?.status === 'connected', 'the server to be restarted');
    expect(registry.status().test?.attempts).to.equal(2);
    const { pid: secondPid } = answer<{ pid: number }>(await callTool(registry, 'test__stats'));
    expect(secondPid).to.not.equal(firstPid);
    expect(isProcessAlive(secondPid)).to.equal(true);
  });

  it('returns an error result within about the time-out and restarts the server when a tool hangs', async () => {
    const { pid: firstPid } = answer<{ pid: number }>(await callTool(registry, 'test__stats'));
    const started = performance.now();

    const result = await callTool(registry, 'test__hang');

    const elapsed = performance.now() - started;
    expect(result.isError).to.equal(true);
    expect(result.content).to.contain('did not answer within 400 ms');
    expect(elapsed).to.be.within(390, 2000);
    await waitFor(() => !isProcessAlive(firstPid), 'the hung server to be gone');
    await waitFor(() => registry.status().test?.status === 'connected', 'the server to be restarted');
    expect(registry.status().test?.attempts).to.equal(2);
  });

  it('cancels the call on the server when the signal aborts', async () => {
    const { pid } = answer<{ pid: number }>(await callTool(registry, 'test__stats'));
    const controller = new AbortController();
    const started = performance.now();
    const pending = callTool(registry, 'test__hang', {}, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('the user went away')), 100);

    const result = await pending;

    expect(performance.now() - started).to.be.below(390);
    expect(result.isError).to.equal(true);
    expect(result.content).to.contain('cancelled');
    await waitFor(async () => answer<{ cancelled: number }>(await callTool(registry, 'test__stats')).cancelled === 1, 'the server to see the cancellation');
    expect(registry.status().test).to.include({ status: 'connected', attempts: 1 });
    expect(answer<{ pid: number }>(await callTool(registry, 'test__stats')).pid).to.equal(pid);
  });

  it('returns a clear error result and restarts the server when the server answers with a malformed result', async () => {
    const result = await callTool(registry, 'test__malformed');

    expect(result.isError).to.equal(true);
    expect(result.content).to.contain('server test returned a malformed result for malformed');
    expect(result.content).to.contain('content');
    await waitFor(() => registry.status().test?.attempts === 2 && registry.status().test?.status === 'connected', 'the server to be restarted');
    expect(answer<{ cancelled: number }>(await callTool(registry, 'test__stats')).cancelled).to.equal(0);
  });

  it('ends the server and every process it started when the registry closes', async () => {
    const { pid: helperPid } = answer<{ pid: number }>(await callTool(registry, 'test__spawn-helper'));
    const { pid: serverPid } = answer<{ pid: number }>(await callTool(registry, 'test__stats'));
    expect(isProcessAlive(helperPid)).to.equal(true);

    await registry.close();

    expect(isProcessAlive(serverPid), 'server process').to.equal(false);
    expect(isProcessAlive(helperPid), 'helper process that ignores SIGTERM').to.equal(false);
  });

  it('ends the processes a crashed server left behind when it crashes', async () => {
    const { pid: helperPid } = answer<{ pid: number }>(await callTool(registry, 'test__spawn-helper'));

    await callTool(registry, 'test__crash');

    await waitFor(() => !isProcessAlive(helperPid), 'the helper of the crashed server to be gone');
  });
});

describe('McpRegistry with servers that cannot start', () => {
  let registry: ReturnType<typeof testRegistry>;

  afterEach(() => registry.close());

  it('resolves start, marks the server failed and serves the other servers when a command does not exist', async () => {
    registry = testRegistry({
      servers: {
        missing: { transport: 'stdio', command: '/nonexistent/mcp-server', args: [], env: {}, per_user: false, require_approval: 'never', idempotent: false },
        everything: everythingStdioConfig(),
      },
    });

    await registry.start();

    const status = registry.status();
    expect(status.missing).to.include({ status: 'failed', tools: 0 });
    expect(status.missing?.error).to.contain('ENOENT');
    expect(status.everything?.status).to.equal('connected');
    const result = await callTool(registry, 'everything__get-sum', { a: 2, b: 3 });
    expect(result.content).to.contain('5');
  });

  it('retries a failed server in the background when it could not be started', async () => {
    registry = testRegistry({ servers: { missing: { transport: 'stdio', command: '/nonexistent/mcp-server', args: [], env: {}, per_user: false, require_approval: 'never', idempotent: false } } });
    await registry.start();

    const status = await waitFor(() => {
      const current = registry.status().missing;
      return current && current.attempts >= 3 ? current : undefined;
    }, 'three attempts');

    expect(status.status).to.be.oneOf(['failed', 'connecting']);
    expect(Date.parse(status.lastAttempt ?? '')).to.be.a('number').and.not.NaN;
  });

  it('connects to the servers in parallel, each within the connect time-out, when they never answer', async () => {
    const silent = () => ({
      transport: 'stdio' as const,
      command: process.execPath,
      args: ['-e', 'setInterval(() => {}, 1000)'],
      env: {},
      per_user: false,
      require_approval: 'never' as const,
      idempotent: false,
    });
    registry = testRegistry({ servers: { one: silent(), two: silent(), three: silent() }, connectTimeoutMs: 600, retry: { initialMs: 60_000, maxMs: 60_000 } });
    const started = performance.now();

    await registry.start();

    expect(performance.now() - started).to.be.below(2000);
    for (const name of ['one', 'two', 'three']) {
      expect(registry.status()[name]).to.include({ status: 'failed', attempts: 1 });
      expect(registry.status()[name]?.error).to.contain('within 600 ms');
    }
  });
});
