import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import winston from 'winston';
import { logLineFormat } from '../../../gateway/server/logger.js';
import { mcpDeploymentFile } from '../../support/mcp-fixtures.js';
import { startHttpTestMcpServer, type HttpTestServer } from '../../support/mcp-test-server.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../../support/otlp-receiver.js';
import { runToExit } from '../../support/run-to-exit.js';
import { startTestService, type TestService } from '../../support/service-harness.js';
import { waitFor } from '../../support/wait-for.js';
import { connectMcp } from '../../support/mcp-client.js';
import { a2aClient, answerOf, asTask, sendRequest, userMessage } from '../../support/a2a-client.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** OTLP's SpanKind values. */
const KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3 } as const;

/** A client's trace the service's spans join: a span id of the caller's, sampled. */
const INCOMING_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const INCOMING_SPAN = '00f067aa0ba902b7';

/** An HTTP proxy in front of a server that records each request's headers (what the MCP server was sent). */
async function startRecordingProxy(target: string): Promise<{ url: string; headers: IncomingHttpHeaders[]; close(): Promise<void> }> {
  const headers: IncomingHttpHeaders[] = [];
  const to = new URL(target);
  const server: Server = createServer((req, res) => {
    headers.push(req.headers);
    const forward = httpRequest({ host: to.hostname, port: to.port, path: to.pathname, method: req.method, headers: { ...req.headers, host: to.host } }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${to.pathname}`,
    headers,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** A JSON logger (as LOG_FORMAT=json writes) whose lines are kept. */
function capturingLogger(lines: Record<string, unknown>[]): winston.Logger {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return winston.createLogger({ level: 'info', format: logLineFormat('json'), transports: [new winston.transports.Stream({ stream: sink })] });
}

/** The spans of one trace once the five of a turn with one tool call (request, turn, two LLM calls, the tool call) are in. */
async function turnSpans(receiver: OtlpReceiver, traceId: () => string | undefined): Promise<ReceivedSpan[]> {
  return waitFor(() => {
    const id = traceId();
    const spans = receiver.spans.filter((span) => span.traceId === id);
    return spans.length >= 5 && spans.some((span) => span.kind === KIND.SERVER) ? spans : undefined;
  }, 'the spans of the turn');
}

describe('OpenTelemetry traces', function () {
  this.timeout(60_000);

  describe('with tracing on over http/json, a chat turn that calls an HTTP tool server', () => {
    let receiver: OtlpReceiver;
    let tools: HttpTestServer;
    let proxy: Awaited<ReturnType<typeof startRecordingProxy>>;
    let harness: TestService;
    let folder: string;
    const logs: Record<string, unknown>[] = [];
    let spans: ReceivedSpan[];
    let requestId: string;
    let sessionId: string;

    const byName = (name: string) => spans.filter((span) => span.name === name);
    const only = (name: string) => {
      const found = byName(name);
      expect(found, name).to.have.length(1);
      return found[0]!;
    };

    before(async () => {
      receiver = await startOtlpReceiver();
      tools = await startHttpTestMcpServer();
      proxy = await startRecordingProxy(tools.url);
      folder = mkdtempSync(join(tmpdir(), 'svc-tracing-'));
      harness = await startTestService({
        logger: capturingLogger(logs),
        env: {
          CONFIG_FILE: mcpDeploymentFile(folder, `  tools:\n    transport: http\n    url: ${proxy.url}\n`),
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
          OTEL_SERVICE_NAME: 'traced-agent',
          OTEL_BSP_SCHEDULE_DELAY: '50',
          INSPECT_STORE_CALLS: 'true',
          // The harness's client's key, an admin's: the agent endpoints need one.
          API_KEYS: 'placeholder',
        },
      });
      const { data, response } = await harness.client.chat.completions
        .create(
          { model: 'test-model', messages: [{ role: 'user', content: 'Look [[tool:tools__request-meta {}]]' }] },
          { headers: { traceparent: `00-${INCOMING_TRACE}-${INCOMING_SPAN}-01` } },
        )
        .withResponse();
      expect(data.choices[0]!.message.content).to.be.a('string');
      requestId = response.headers.get('x-request-id')!;
      sessionId = response.headers.get('x-session-id')!;
      spans = await turnSpans(receiver, () => INCOMING_TRACE);
    });

    after(async () => {
      await harness?.close();
      await proxy?.close();
      await tools?.close();
      await receiver?.close();
      if (folder) rmSync(folder, { recursive: true, force: true });
    });

    it('sends the request, the turn, each LLM call and the tool call as spans of the incoming trace, each under the one it ran in', () => {
      const server = only('POST /v1/chat/completions');
      const turn = only('invoke_agent traced-agent');
      const chats = byName(`chat ${harness.config.llm.model}`);
      const tool = only('execute_tool tools__request-meta');
      expect(chats).to.have.length(2);
      expect(server).to.include({ kind: KIND.SERVER, parentSpanId: INCOMING_SPAN, traceId: INCOMING_TRACE });
      expect(turn).to.include({ kind: KIND.INTERNAL, parentSpanId: server.spanId });
      for (const chat of chats) expect(chat).to.include({ kind: KIND.CLIENT, parentSpanId: turn.spanId });
      expect(tool).to.include({ kind: KIND.INTERNAL, parentSpanId: turn.spanId });
      expect(server.resource['service.name']).to.equal('traced-agent');
    });

    it('gives each span the attributes of the HTTP and GenAI semantic conventions', () => {
      expect(only('POST /v1/chat/completions').attributes).to.include({
        'http.request.method': 'POST',
        'http.route': '/v1/chat/completions',
        'http.response.status_code': 200,
        'url.path': '/v1/chat/completions',
      });
      expect(only('invoke_agent traced-agent').attributes).to.include({
        'gen_ai.operation.name': 'invoke_agent',
        'gen_ai.agent.name': 'traced-agent',
        'gen_ai.conversation.id': sessionId,
      });
      const [first, second] = byName(`chat ${harness.config.llm.model}`).sort((a, b) => (a.attributes['gen_ai.response.finish_reasons'] as string[])[0]!.localeCompare((b.attributes['gen_ai.response.finish_reasons'] as string[])[0]!)).reverse();
      const llmUrl = new URL(harness.llm.url);
      for (const chat of [first!, second!]) {
        expect(chat.attributes).to.include({
          'gen_ai.operation.name': 'chat',
          'gen_ai.provider.name': 'openai',
          'gen_ai.request.model': harness.config.llm.model,
          'gen_ai.conversation.id': sessionId,
          'server.address': llmUrl.hostname,
          'server.port': Number(llmUrl.port),
        });
        expect(chat.attributes['gen_ai.usage.input_tokens']).to.be.a('number').above(0);
        expect(chat.attributes['gen_ai.usage.output_tokens']).to.be.a('number').above(0);
        expect(chat.attributes['gen_ai.response.id']).to.be.a('string').that.is.not.empty;
        expect(chat.attributes['gen_ai.response.model']).to.be.a('string').that.is.not.empty;
        expect(chat.attributes).to.have.property('gen_ai.request.temperature');
        expect(chat.attributes).to.have.property('gen_ai.request.max_tokens');
      }
      expect(first!.attributes['gen_ai.response.finish_reasons']).to.deep.equal(['tool_calls']);
      expect(second!.attributes['gen_ai.response.finish_reasons']).to.deep.equal(['stop']);
      // The call id is the one the model gave: the LLM is sent it back with the result.
      const callId = (harness.llm.requests.at(-1)!.body.messages as Array<{ role: string; tool_call_id?: string }>).find((message) => message.role === 'tool')!.tool_call_id;
      expect(only('execute_tool tools__request-meta').attributes).to.include({
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'tools__request-meta',
        'gen_ai.tool.call.id': callId,
        'gen_ai.tool.type': 'function',
      });
    });

    it('records no message contents when OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is not set', () => {
      for (const span of spans) {
        for (const name of ['gen_ai.input.messages', 'gen_ai.output.messages', 'gen_ai.system_instructions', 'gen_ai.tool.call.arguments', 'gen_ai.tool.call.result']) {
          expect(span.attributes, `${span.name} ${name}`).not.to.have.property(name);
        }
      }
    });

    it('sends each LLM call its span as traceparent when it calls the LLM server', () => {
      const chatSpans = byName(`chat ${harness.config.llm.model}`).map((span) => span.spanId).sort();
      const sent = harness.llm.requests.filter((request) => request.path?.endsWith('/chat/completions')).map((request) => String(request.headers.traceparent));
      expect(sent.map((header) => header.split('-')[1])).to.deep.equal([INCOMING_TRACE, INCOMING_TRACE]);
      expect(sent.map((header) => header.split('-')[2]).sort()).to.deep.equal(chatSpans);
    });

    it('sends the tool call its span as the traceparent header and in _meta when it calls an HTTP tool server', async () => {
      const tool = only('execute_tool tools__request-meta');
      const expected = `00-${INCOMING_TRACE}-${tool.spanId}-01`;
      expect(proxy.headers.map((headers) => headers.traceparent).filter(Boolean)).to.deep.equal([expected]);
      const toolMessage = (harness.llm.requests.at(-1)!.body.messages as Array<{ role: string; content: string }>).find((message) => message.role === 'tool')!;
      expect(JSON.parse(toolMessage.content)).to.include({ traceparent: expected });
    });

    it('writes the trace id and the request span id in the JSON log lines of the request and of its session', async () => {
      const server = only('POST /v1/chat/completions');
      const requestLine = await waitFor(() => logs.find((line) => line.requestId === requestId && String(line.message).startsWith('POST /v1/chat/completions')), 'the request line');
      expect(requestLine).to.include({ trace_id: INCOMING_TRACE, span_id: server.spanId });
      const toolLine = logs.find((line) => line.sessionId === sessionId && String(line.message).startsWith('tool tools/request-meta'));
      expect(toolLine).to.include({ requestId, trace_id: INCOMING_TRACE, span_id: server.spanId });
    });

    it('stores the trace id and each call its own span id in the call records /inspect shows', async () => {
      const response = await fetch(`${harness.service.url}/v1/agents/${sessionId}/calls`, { headers: { Authorization: 'Bearer placeholder' } });
      const calls = ((await response.json()) as { data: Array<{ type: string; trace_id: string | null; span_id: string | null }> }).data;
      expect(calls.map((call) => call.type)).to.deep.equal(['llm', 'tool', 'llm']);
      expect(calls.map((call) => call.trace_id)).to.deep.equal([INCOMING_TRACE, INCOMING_TRACE, INCOMING_TRACE]);
      const llmSpans = byName(`chat ${harness.config.llm.model}`).map((span) => span.spanId);
      expect(llmSpans).to.include(calls[0]!.span_id);
      expect(llmSpans).to.include(calls[2]!.span_id);
      expect(calls[1]!.span_id).to.equal(only('execute_tool tools__request-meta').spanId);
      const stored = await harness.service.database.db.selectFrom('session_calls').select(['trace_id']).where('session_id', '=', sessionId).execute();
      expect(stored.map((row) => row.trace_id)).to.deep.equal([INCOMING_TRACE, INCOMING_TRACE, INCOMING_TRACE]);
    });

    /** The spans of the trace a request's log line names, once `count` are in. */
    async function traceOfRequest(requestId: string, count: number): Promise<ReceivedSpan[]> {
      const line = await waitFor(() => logs.find((entry) => entry.requestId === requestId && /^(POST|GET) /.test(String(entry.message))), 'the request line');
      return waitFor(() => {
        const found = receiver.spans.filter((span) => span.traceId === line.trace_id);
        return found.length >= count ? found : undefined;
      }, `the ${count} spans of the request`);
    }

    it('traces a streamed turn, its LLM call marked as streamed, the request span ending with the stream', async () => {
      const { data: stream, response } = await harness.client.chat.completions.create({ model: 'test-model', stream: true, messages: [{ role: 'user', content: 'Stream it' }] }).withResponse();
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      expect(text).to.contain('Stream it');
      const trace = await traceOfRequest(response.headers.get('x-request-id')!, 3);
      const chat = trace.find((span) => span.kind === KIND.CLIENT)!;
      expect(chat.attributes).to.include({ 'gen_ai.request.stream': true });
      expect(chat.attributes['gen_ai.response.finish_reasons']).to.deep.equal(['stop']);
      expect(chat.attributes['gen_ai.usage.output_tokens']).to.be.a('number').above(0);
      expect(trace.find((span) => span.kind === KIND.SERVER)!.attributes).to.include({ 'http.response.status_code': 200, 'http.route': '/v1/chat/completions' });
    });

    it('traces a Responses API turn the same way, under a span named by its route', async () => {
      const { response } = await harness.client.responses.create({ model: 'test-model', input: 'Hello responses' }).withResponse();
      const trace = await traceOfRequest(response.headers.get('x-request-id')!, 3);
      const server = trace.find((span) => span.kind === KIND.SERVER)!;
      expect(server.name).to.equal('POST /v1/responses');
      const turn = trace.find((span) => span.name === 'invoke_agent traced-agent')!;
      expect(turn.parentSpanId).to.equal(server.spanId);
      expect(trace.find((span) => span.kind === KIND.CLIENT)!.parentSpanId).to.equal(turn.spanId);
    });

    /** The turn span whose parent is a request span named `name`, with that request span, once both are in. */
    function turnUnderRequest(name: string): Promise<{ server: ReceivedSpan; turn: ReceivedSpan }> {
      return waitFor(() => {
        for (const server of receiver.spans.filter((span) => span.kind === KIND.SERVER && span.name === name)) {
          const turn = receiver.spans.find((span) => span.parentSpanId === server.spanId && span.name === 'invoke_agent traced-agent');
          if (turn) return { server, turn };
        }
        return undefined;
      }, `a turn under ${name}`);
    }

    it('traces an MCP tool call\'s turn under its /mcp request, with the LLM call under the turn', async () => {
      const { client } = await connectMcp(harness.service.url, { headers: { Authorization: 'Bearer placeholder' }, name: 'tracing-test' });
      try {
        const result = await client.callTool({ name: 'svc-agent', arguments: { message: 'Hello over MCP' } });
        expect(result.isError ?? false).to.equal(false);
      } finally {
        await client.close();
      }
      const { server, turn } = await turnUnderRequest('POST /mcp');
      expect(turn.traceId).to.equal(server.traceId);
      const chat = await waitFor(() => receiver.spans.find((span) => span.parentSpanId === turn.spanId && span.kind === KIND.CLIENT), 'the LLM call under the MCP turn');
      expect(chat.attributes['gen_ai.operation.name']).to.equal('chat');
    });

    it('traces an A2A message\'s turn under its /a2a request when the call waits for the task', async () => {
      const client = await a2aClient(harness.service.url, 'placeholder');
      const task = asTask(await client.sendMessage(sendRequest(userMessage('Hello over A2A'))));
      expect(answerOf(task)).to.contain('Hello over A2A');
      const { server, turn } = await turnUnderRequest('POST /a2a');
      expect(turn.attributes['gen_ai.conversation.id']).to.equal(task.contextId);
      expect(turn.traceId).to.equal(server.traceId);
    });

    it('marks the LLM call, the turn and not the request failed, with error.type, when the LLM server fails', async () => {
      const { response } = await harness.client.chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'Fail [[error:400]]' }] }).withResponse();
      const trace = await traceOfRequest(response.headers.get('x-request-id')!, 3);
      const chat = trace.find((span) => span.kind === KIND.CLIENT)!;
      expect(chat.status.code).to.equal(2);
      expect(chat.attributes['error.type']).to.equal('400');
      expect(trace.find((span) => span.name.startsWith('invoke_agent'))!.status.code).to.equal(2);
      // The failure is the reply's text (llm.failure_mode: reply): the request succeeded.
      expect(trace.find((span) => span.kind === KIND.SERVER)!.status.code).to.equal(0);
    });

    it('loads the SDK when tracing is on (so the check that it is not loaded when off can fail)', () => {
      const loaded = Object.keys(createRequire(import.meta.url).cache);
      expect(loaded.some((path) => path.includes('/node_modules/@opentelemetry/sdk-trace-base/'))).to.equal(true);
    });
  });

  describe('with tracing on over http/protobuf and message contents captured', () => {
    let receiver: OtlpReceiver;
    let harness: TestService;
    let spans: ReceivedSpan[];
    let traceId: string | undefined;

    before(async () => {
      receiver = await startOtlpReceiver();
      harness = await startTestService({
        env: {
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
          OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
          OTEL_BSP_SCHEDULE_DELAY: '50',
          SYSTEM_PROMPT: 'You are a careful agent.',
        },
      });
      await harness.client.chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'Hello, proto' }] });
      spans = await waitFor(() => {
        traceId = receiver.spans.find((span) => span.kind === KIND.SERVER)?.traceId;
        const trace = receiver.spans.filter((span) => span.traceId === traceId);
        return trace.length >= 3 ? trace : undefined;
      }, 'the spans of the turn');
    });

    after(async () => {
      await harness?.close();
      await receiver?.close();
    });

    it('sends protobuf that decodes into a root request span with the turn and its LLM call under it', () => {
      expect(receiver.contentTypes.every((type) => type === 'application/x-protobuf')).to.equal(true);
      const server = spans.find((span) => span.kind === KIND.SERVER)!;
      const turn = spans.find((span) => span.name === 'invoke_agent svc-agent')!;
      const chat = spans.find((span) => span.name === `chat ${harness.config.llm.model}`)!;
      expect(server.parentSpanId).to.equal('');
      expect(turn.parentSpanId).to.equal(server.spanId);
      expect(chat.parentSpanId).to.equal(turn.spanId);
      expect(chat.attributes['gen_ai.usage.output_tokens']).to.be.a('number').above(0);
      expect(harness.llm.requests.at(-1)!.headers.traceparent).to.match(new RegExp(`^00-${traceId}-${chat.spanId}-01$`));
    });

    it('records the system instructions, the input and the output messages in the convention\'s form when capture is on', () => {
      const chat = spans.find((span) => span.name === `chat ${harness.config.llm.model}`)!;
      const system = JSON.parse(chat.attributes['gen_ai.system_instructions'] as string) as Array<{ type: string; content: string }>;
      expect(system.map((part) => part.content).join('\n')).to.contain('You are a careful agent.');
      const input = JSON.parse(chat.attributes['gen_ai.input.messages'] as string) as Array<{ role: string; parts: Array<{ type: string; content: string }> }>;
      expect(input.at(-1)).to.deep.equal({ role: 'user', parts: [{ type: 'text', content: 'Hello, proto' }] });
      const output = JSON.parse(chat.attributes['gen_ai.output.messages'] as string) as Array<{ role: string; finish_reason: string; parts: Array<{ type: string; content: string }> }>;
      expect(output).to.have.length(1);
      expect(output[0]).to.include({ role: 'assistant', finish_reason: 'stop' });
      expect(output[0]!.parts[0]!.type).to.equal('text');
    });
  });

  describe('when the service closes', () => {
    it('sends the spans still queued, without waiting for the next batch', async () => {
      const receiver = await startOtlpReceiver();
      try {
        // A batch every minute: only the flush at close sends the turn's spans within the test.
        const harness = await startTestService({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '60000' } });
        await harness.client.chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'Hello' }] });
        expect(receiver.spans).to.deep.equal([]);
        await harness.close();
        expect(receiver.spans.map((span) => span.kind).sort()).to.deep.equal([KIND.INTERNAL, KIND.SERVER, KIND.CLIENT].sort());
      } finally {
        await receiver.close();
      }
    });

    it('closes within its bound when the collector takes the export and never answers', async () => {
      const silent = createServer(() => undefined);
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      try {
        const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
        const harness = await startTestService({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_BSP_SCHEDULE_DELAY: '60000', OTEL_EXPORTER_OTLP_TIMEOUT: '60000' } });
        await harness.client.chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'Hello' }] });
        const started = performance.now();
        await harness.close();
        // The flush is given 5 s (TRACING_SHUTDOWN_MS), the export 60 s; the rest of the close takes milliseconds.
        expect(performance.now() - started).to.be.within(4_900, 10_000);
      } finally {
        silent.closeAllConnections();
        await new Promise((resolve) => silent.close(resolve));
      }
    });
  });

  describe('when the collector is unreachable', () => {
    it('answers the turn and logs a warning that the spans were not sent', async () => {
      const logs: Record<string, unknown>[] = [];
      const closed = createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const url = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
      await new Promise((resolve) => closed.close(resolve));
      const harness = await startTestService({ logger: capturingLogger(logs), env: { OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_EXPORTER_OTLP_TIMEOUT: '500' } });
      try {
        const completion = await harness.client.chat.completions.create({ model: 'test-model', messages: [{ role: 'user', content: 'Hello' }] });
        expect(completion.choices[0]!.message.content).to.contain('Hello');
        const warning = await waitFor(() => logs.find((line) => line.level === 'warn' && String(line.message).startsWith('tracing: ')), 'the warning');
        expect(String(warning.message)).to.match(/^tracing: spans may not have been sent: .*ECONNREFUSED/);
        expect(String(warning.message)).not.to.contain('    at ');
      } finally {
        await harness.close();
      }
    });
  });

  describe('with tracing off', () => {
    it('loads no OpenTelemetry module, sends nothing and adds no traceparent when OTEL_TRACES_EXPORTER=none', async () => {
      const receiver = await startOtlpReceiver();
      try {
        const run = await runToExit(process.execPath, ['--import', 'tsx', 'test/support/tracing-off-turn.ts'], {
          cwd: REPO_ROOT,
          env: { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_EXPORTER: 'none' },
        });
        expect(run.code, run.stderr).to.equal(0);
        const report = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as { loaded: string[]; traceparents: number; traceIds: number; answered: boolean };
        // The API alone may be there: prom-client loads it (for exemplars) with metrics on; the SDK, the exporters and the service's own tracing module never.
        expect({ ...report, loaded: report.loaded.filter((path) => !path.includes('/node_modules/@opentelemetry/api/')) }).to.deep.equal({ loaded: [], traceparents: 0, traceIds: 0, answered: true });
        expect(receiver.contentTypes).to.deep.equal([]);
      } finally {
        await receiver.close();
      }
    });
  });

  describe('start-up', () => {
    it('refuses OTEL_EXPORTER_OTLP_PROTOCOL=grpc with a configuration error (exit 78) when tracing is on', async () => {
      const run = await runToExit(process.execPath, ['--import', 'tsx', 'gateway/server/main.ts'], {
        cwd: REPO_ROOT,
        env: { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', DATA_DIR: 'memory://', APP_PORT: '0' },
      });
      expect(run.code).to.equal(78);
      expect(run.stderr).to.contain('grpc is not supported');
    });
  });
});
