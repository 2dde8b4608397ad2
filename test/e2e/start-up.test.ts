import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { gatedEverythingServer, mcpDeploymentFile, type GatedServer } from '../support/mcp-fixtures.js';
import { startTestService, type TestService } from '../support/service-harness.js';
import { isProcessAlive } from '../support/wait-for.js';

type Health = {
  status: string;
  starting: string[];
  mcp_servers?: Record<string, { status: string; tools: number; attempts: number }>;
};

async function health(harness: TestService): Promise<Health> {
  const response = await fetch(`${harness.service.url}/health`);
  expect(response.status).to.equal(200);
  return (await response.json()) as Health;
}

describe('start-up with a tool server that is slow to start', () => {
  let folder: string;
  let gate: GatedServer;
  let harness: TestService | undefined;

  beforeEach(() => {
    folder = mkdtempSync(join(tmpdir(), 'svc-start-up-'));
    gate = gatedEverythingServer(folder, 'slow');
  });
  afterEach(async () => {
    gate.open();
    await harness?.close();
    harness = undefined;
    rmSync(folder, { recursive: true, force: true });
  });

  /** The service listening while `slow` is held at its gate; a start that waited for it would fail on its time-out first. */
  function startHeld(connectTimeoutMs = 10_000): Promise<TestService> {
    return startTestService({
      listeningOnly: true,
      env: { CONFIG_FILE: mcpDeploymentFile(folder, gate.yaml), TOOLS_CONNECT_TIMEOUT_MS: String(connectTimeoutMs) },
    });
  }

  it('answers /health while the server connects, naming mcp_servers as starting and the server as connecting', async () => {
    harness = await startHeld();
    const early = await health(harness);
    expect(early).to.deep.include({ status: 'ok', starting: ['mcp_servers'] });
    expect(early.mcp_servers).to.deep.equal({ slow: { status: 'connecting', tools: 0, attempts: 1 } });

    gate.open();
    await harness.service.started;
    const later = await health(harness);
    expect(later.starting).to.deep.equal([]);
    expect(later.mcp_servers!.slow).to.deep.include({ status: 'connected', attempts: 1 });
    expect(later.mcp_servers!.slow!.tools).to.be.above(0);
  });

  it("gives a chat completion sent while the server connects the server's tools", async () => {
    harness = await startHeld();
    // The server may start only once the request has reached the service.
    harness.service.server.once('request', () => gate.open());
    const completion = await harness.client.chat.completions.create({
      model: 'svc-agent',
      messages: [{ role: 'user', content: 'Add them up [[tool:slow__get-sum {"a":2,"b":3}]]' }],
    });
    expect(completion.choices[0]!.message.content).to.match(/^Tool result: .*\b5\b/);
    const first = harness.llm.requests.find((request) => request.kind === 'chat')!;
    const offered = (first.body.tools ?? []).map((tool) => (tool as { function: { name: string } }).function.name);
    expect(offered).to.include('slow__get-sum');
    expect(String(first.body.messages![0]!.content)).to.include('slow__get-sum');
  });

  it('closes without waiting for a connection in flight, and ends the server process', async () => {
    // A close that waited for the connection attempt would outlast the test's time-out.
    harness = await startHeld(120_000);
    const pid = await gate.pid();
    const closing = harness.close();
    harness = undefined;
    await closing;
    expect(isProcessAlive(pid)).to.equal(false);
  });
});
