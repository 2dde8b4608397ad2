import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { EVERYTHING_STDIO_YAML, freePort, mcpDeploymentFile } from '../../support/mcp-fixtures.js';
import { readText, sseData } from '../../support/service-harness.js';
import { killToExit } from '../../support/run-to-exit.js';
import { waitFor } from '../../support/wait-for.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

type LogEntry = Record<string, unknown> & { level: string; message: string };

/**
 * One chat turn that calls a tool, as a client sends it, and what the service answered:
 * `requestId` is the service's own id (its X-Request-ID answer), `clientRequestId` the client's.
 */
type Sent = { requestId: string; clientRequestId: string; userId: string; secret: string; sessionId: string; reply: string };

/** The X-Request-ID both concurrent turns send: a client's id is no key to the service's logs. */
const SHARED_CLIENT_ID = 'req-json-same';

describe('logs that join up (LOG_FORMAT=json, the service as a process)', function () {
  this.timeout(120_000);
  let llm: FakeLlm;
  let folder: string;
  let child: ChildProcess;
  const stdout: string[] = [];
  let stderr = '';
  let entries: LogEntry[];
  let sent: Sent[];
  /** A turn through the Responses API: its request id and the session it answered from. */
  let responsesTurn: { requestId: string; sessionId: string };
  /** The service's id of a request to the inspector, sent with an X-Request-ID holding a tab. */
  let inspectRequestId: string;
  /** /health once the tool servers are up. */
  let health: { mcp_servers: Record<string, { status: string; tools: number }> };

  /** A chat completion whose message makes the scripted LLM call everything__echo with `secret`. */
  async function chatWithTool(baseUrl: string, clientRequestId: string, userId: string, stream: boolean): Promise<Sent> {
    const secret = `secret-${userId}-${clientRequestId}`;
    const response = await fetch(`${baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Request-ID': clientRequestId, 'X-User-ID': userId },
      body: JSON.stringify({ stream, messages: [{ role: 'user', content: `Say [[tool:everything__echo {"message":"${secret}"}]]` }] }),
    });
    expect(response.status).to.equal(200);
    const requestId = response.headers.get('x-request-id')!;
    const sessionId = response.headers.get('x-session-id')!;
    const reply = stream
      ? sseData(await readText(response))
          .slice(0, -1)
          .map((data) => (JSON.parse(data) as { choices: Array<{ delta: { content?: string } }> }).choices[0]?.delta.content ?? '')
          .join('')
      : ((await response.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content;
    return { requestId, clientRequestId, userId, secret, sessionId, reply };
  }

  function isRequestLine(entry: LogEntry, requestId: string, path = '/v1/chat/completions'): boolean {
    return entry.requestId === requestId && entry.message.startsWith(`POST ${path} `);
  }

  before(async () => {
    llm = await startFakeLlm();
    folder = mkdtempSync(join(tmpdir(), 'svc-json-logs-'));
    const port = await freePort();
    child = spawn(process.execPath, ['--import', 'tsx', 'gateway/server/main.ts'], {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        APP_HOST: '127.0.0.1',
        APP_PORT: String(port),
        DB_URL: '',
        DATA_DIR: 'memory://',
        API_KEYS: '',
        LLM_BASE_URL: llm.url,
        CONFIG_FILE: mcpDeploymentFile(folder, EVERYTHING_STDIO_YAML),
        LOG_FORMAT: 'json',
        LOG_LEVEL: 'debug',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const stdoutClosed = once(createInterface({ input: child.stdout! }).on('line', (line) => stdout.push(line)), 'close');
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    await waitFor(() => stdout.some((line) => line.includes('svc-agent listening on')) || child.exitCode !== null, 'the service to listen', 60_000);
    expect(child.exitCode, `${stdout.join('\n')}\n${stderr}`).to.equal(null);

    health = await waitFor(async () => {
      const answer = (await (await fetch(`http://127.0.0.1:${port}/health`)).json()) as typeof health & { starting: string[] };
      return answer.starting.length === 0 ? answer : undefined;
    }, "the tool servers' first connections", 60_000);

    // Two turns at once from two users with the same X-Request-ID, each with a tool call: the
    // lines of one must not take the other's ids.
    const baseUrl = `http://127.0.0.1:${port}`;
    sent = await Promise.all([chatWithTool(baseUrl, SHARED_CLIENT_ID, 'ada', false), chatWithTool(baseUrl, SHARED_CLIENT_ID, 'bob', true)]);
    const response = await fetch(`${baseUrl}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Request-ID': 'req-json-cy', 'X-User-ID': 'cy' },
      body: JSON.stringify({ model: 'svc-agent', input: 'hello' }),
    });
    expect(response.status).to.equal(200);
    await response.arrayBuffer();
    responsesTurn = { requestId: response.headers.get('x-request-id')!, sessionId: response.headers.get('x-session-id')! };
    // A route of a router mounted on a path (the inspector's), and a client id that is no sane one.
    const inspected = await fetch(`${baseUrl}/inspect/sessions`, { headers: { 'X-Request-ID': 'tab\there' } });
    expect(inspected.status).to.equal(200);
    await inspected.arrayBuffer();
    inspectRequestId = inspected.headers.get('x-request-id')!;
    // The request line is written when the response closes, which the client may see first.
    const hasRequestLine = (requestId: string, path?: string) => stdout.some((line) => isRequestLine(JSON.parse(line) as LogEntry, requestId, path));
    await waitFor(
      () => sent.every(({ requestId }) => hasRequestLine(requestId)) && hasRequestLine(responsesTurn.requestId, '/v1/responses') && stdout.some((line) => line.includes(inspectRequestId)),
      'the request lines',
    );
    child.kill('SIGTERM');
    await once(child, 'exit');
    await stdoutClosed;
    entries = stdout.map((line) => JSON.parse(line) as LogEntry);
  });

  after(async () => {
    if (child) await killToExit(child);
    await llm?.close();
    if (folder) rmSync(folder, { recursive: true, force: true });
  });

  it('answers both turns through the tool', () => {
    expect(sent.map(({ reply }) => reply)).to.deep.equal(sent.map(({ secret }) => `Tool result: Echo: ${secret}`));
  });

  it('writes every line on standard output as one JSON object with time, level and message', () => {
    expect(stdout.length).to.be.above(5);
    for (const line of stdout) {
      const entry = JSON.parse(line) as LogEntry;
      expect(entry, line).to.include.keys('timestamp', 'level', 'message');
    }
    expect(entries.map(({ message }) => message)).to.include('SIGTERM: stopping (turns in flight may take up to 30000 ms)');
  });

  it('gives each request an id of its own, answered in X-Request-ID, when two users send the same X-Request-ID', () => {
    const [ada, bob] = sent;
    for (const { requestId } of sent) expect(requestId).to.match(/^req_[0-9a-f]{32}$/);
    expect(ada!.requestId).not.to.equal(bob!.requestId);
    for (const { requestId, clientRequestId, userId, sessionId } of sent) {
      const requestLines = entries.filter((entry) => isRequestLine(entry, requestId));
      expect(requestLines[0]).to.include({ requestId, clientRequestId, userId, sessionId });
    }
    expect(ada!.sessionId).not.to.equal(bob!.sessionId);
    // No line of one user's turn names the other user or their session.
    for (const entry of entries.filter((line) => line.clientRequestId === SHARED_CLIENT_ID)) {
      const own = sent.find(({ requestId }) => requestId === entry.requestId)!;
      expect(entry, entry.message).to.include({ userId: own.userId, sessionId: own.sessionId });
    }
  });

  it('logs a route of the inspector with its /inspect path, and leaves out a client id that is not printable ASCII', () => {
    const lines = entries.filter((entry) => entry.requestId === inspectRequestId);
    expect(lines).to.have.length(1);
    expect(lines[0]!.message).to.match(/^GET \/inspect\/sessions 200 /);
    expect(lines[0]).not.to.have.property('clientRequestId');
  });

  it('gives every line about a request\'s session its request id, and the request line its session and user', () => {
    for (const { requestId, userId, sessionId } of sent) {
      const aboutSession = entries.filter((entry) => entry.sessionId === sessionId);
      // session created, its transitions, the tool call and the request line at least.
      expect(aboutSession.length, requestId).to.be.at.least(4);
      for (const entry of aboutSession) expect(entry, entry.message).to.include({ requestId, userId });
      for (const entry of entries.filter((line) => line.requestId === requestId)) expect(entry, entry.message).to.include({ sessionId, userId });
      const requestLines = entries.filter((entry) => isRequestLine(entry, requestId));
      expect(requestLines).to.have.length(1);
      expect(requestLines[0]).to.include({ level: 'info', requestId, sessionId, userId, status: 200 });
    }
  });

  it('gives the request line of a Responses API turn its session and user too', () => {
    const { requestId, sessionId } = responsesTurn;
    expect(sessionId).to.be.a('string');
    const requestLines = entries.filter((entry) => isRequestLine(entry, requestId, '/v1/responses'));
    expect(requestLines).to.have.length(1);
    expect(requestLines[0]).to.include({ level: 'info', requestId, sessionId, userId: 'cy', status: 200 });
  });

  it('logs the tool servers with the tool count /health answers, once their first connections are done', () => {
    const lines = entries.filter((entry) => entry.message.startsWith('tool servers: '));
    expect(lines).to.have.length(1);
    const { status, tools } = health.mcp_servers.everything!;
    expect(tools).to.be.above(0);
    expect(lines[0]!.message).to.equal(`tool servers: everything ${status}, ${tools} tools`);
    expect(lines[0]!.servers).to.deep.equal({ everything: { status, tools } });
  });

  it('writes each tool call as one info line with its name, duration and outcome, never its arguments or result', () => {
    for (const { requestId, userId, sessionId, secret } of sent) {
      const toolLines = entries.filter((entry) => entry.sessionId === sessionId && entry.tool !== undefined);
      expect(toolLines, requestId).to.have.length(1);
      const [line] = toolLines;
      expect(line).to.include({ level: 'info', message: 'tool everything/echo ok', server: 'everything', tool: 'echo', outcome: 'ok', requestId, sessionId, userId });
      expect(line!.durationMs).to.be.a('number');
      expect(Object.keys(line!)).to.have.members(['timestamp', 'level', 'message', 'requestId', 'clientRequestId', 'sessionId', 'userId', 'server', 'tool', 'durationMs', 'outcome']);
      const infoLines = stdout.filter((text) => (JSON.parse(text) as LogEntry).level === 'info');
      expect(infoLines.filter((text) => text.includes(secret))).to.deep.equal([]);
    }
  });
});
