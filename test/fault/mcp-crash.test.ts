import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { testServerStdioConfig } from '../support/mcp-test-server.js';
import { startTestService, type TestService } from '../support/service-harness.js';
import { isProcessAlive, waitFor } from '../support/wait-for.js';
import { sendTurn } from './chat-turn.js';
import { openFaultDatabase, type FaultDatabase } from './fault-database.js';
import { storedTranscript } from './transcript.js';

const SESSIONS = 6;
/** Tool calls time out long after the crash must have been noticed: a quick answer means the crash was. */
const TOOL_CALL_TIMEOUT_MS = 30_000;
const REQUEST_BOUND_MS = 10_000;

type Health = { mcp_servers: Record<string, { status: string; attempts: number }> };

describe('an MCP server killed in the middle of concurrent tool calls', function () {
  this.timeout(60_000);
  let folder: string;
  let database: FaultDatabase;
  let harness: TestService;

  before(async () => {
    folder = mkdtempSync(join(tmpdir(), 'svc-mcp-crash-'));
    const server = testServerStdioConfig() as { command: string; args: string[]; cwd: string };
    const configFile = join(folder, 'deployment.yaml');
    writeFileSync(
      configFile,
      ['mcp_servers:', '  test:', '    transport: stdio', `    command: ${JSON.stringify(server.command)}`, `    args: ${JSON.stringify(server.args)}`, `    cwd: ${JSON.stringify(server.cwd)}`, ''].join('\n'),
    );
    database = await openFaultDatabase('mcp_crash');
    harness = await startTestService({ env: { ...database.env, CONFIG_FILE: configFile, TOOLS_CALL_TIMEOUT_MS: String(TOOL_CALL_TIMEOUT_MS), TOOLS_HEARTBEAT_MS: '100' } });
  });
  after(async () => {
    await harness?.close();
    await database?.drop();
    rmSync(folder, { recursive: true, force: true });
  });

  async function serverPid(sessionId?: string): Promise<number> {
    const answer = await sendTurn(harness.baseURL, { text: 'which process? [[tool:test__stats]]', stream: false, sessionId, signal: AbortSignal.timeout(REQUEST_BOUND_MS) });
    return (JSON.parse(answer.content.replace(/^Tool result: /, '')) as { pid: number }).pid;
  }

  async function health(): Promise<Health> {
    return (await (await fetch(`${harness.service.url}/health`)).json()) as Health;
  }

  it('answers every session with the failed tool result, restarts the server, and serves tool calls again', async () => {
    const crashedPid = await serverPid();
    const inTool = new Set<string>();
    const stopWatching = harness.service.events.on('session:state_changed', ({ sessionId, to }) => {
      if (to === 'use_tool') inTool.add(sessionId);
    });
    const sessionIds = Array.from({ length: SESSIONS }, (_, index) => `mcp-crash-${index}-${Date.now()}`);
    const started = Date.now();
    const answers = Promise.all(
      sessionIds.map((sessionId, index) =>
        sendTurn(harness.baseURL, { text: `wait for me ${index} [[tool:test__hang]]`, stream: index % 2 === 0, sessionId, signal: AbortSignal.timeout(REQUEST_BOUND_MS) }),
      ),
    );
    await waitFor(() => sessionIds.every((sessionId) => inTool.has(sessionId)), 'every session to be in its tool call');
    stopWatching();
    process.kill(crashedPid, 'SIGKILL');

    for (const [index, answer] of (await answers).entries()) {
      expect(answer.status, `session ${index}`).to.equal(200);
      expect(answer.content, `session ${index}`).to.match(/^Tool result: Error: server test closed the connection during the call to hang: .*SIGKILL/);
      if (index % 2 === 0) expect(answer.done, `session ${index}: ends with [DONE]`).to.equal(true);
    }
    expect(Date.now() - started, 'the crash was noticed, not waited out').to.be.below(TOOL_CALL_TIMEOUT_MS);
    await harness.service.writer.flush();
    for (const sessionId of sessionIds) {
      const roles = (await storedTranscript(harness.service.database, sessionId)).map((line) => line.slice(0, line.indexOf(':')));
      expect(roles, sessionId).to.deep.equal(['user', 'tool_call', 'tool', 'assistant']);
    }

    await waitFor(async () => (await health()).mcp_servers.test?.status === 'connected', 'the server to be restarted');
    expect(isProcessAlive(crashedPid)).to.equal(false);
    const restartedPid = await serverPid(sessionIds[0]);
    expect(restartedPid).to.not.equal(crashedPid);
    expect((await health()).mcp_servers.test).to.include({ status: 'connected', attempts: 2 });
    await harness.service.writer.flush();
    const continued = await storedTranscript(harness.service.database, sessionIds[0]!);
    expect(continued.slice(4).map((line) => line.slice(0, line.indexOf(':')))).to.deep.equal(['user', 'tool_call', 'tool', 'assistant']);
  });
});
