import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { createLocalEmbedder } from '../../../runtime/llm/embedder.js';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { createEmbedderRecordRepository, createMemoryRepository } from '../../../storage/index.js';
import { startGatedEmbeddings, type GatedEmbeddings } from '../../support/gated-embeddings.js';
import { gatedEverythingServer, mcpDeploymentFile, type GatedServer } from '../../support/mcp-fixtures.js';
import { startTestService, type TestService } from '../../support/service-harness.js';
import { isProcessAlive } from '../../support/wait-for.js';

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

/** One chat completion of user `ada`; the response as it came. */
function say(harness: TestService, text: string): Promise<Response> {
  return fetch(`${harness.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-User-ID': 'ada' },
    body: JSON.stringify({ messages: [{ role: 'user', content: text }] }),
  });
}

describe('start-up with an LLM server that is slow to embed', () => {
  let llm: FakeLlm;
  let gate: GatedEmbeddings;
  let folder: string;
  let harness: TestService | undefined;

  beforeEach(async () => {
    llm = await startFakeLlm();
    gate = await startGatedEmbeddings(llm);
    folder = mkdtempSync(join(tmpdir(), 'svc-start-up-'));
  });
  afterEach(async () => {
    gate.open();
    await harness?.close();
    harness = undefined;
    await gate.close();
    await llm.close();
    rmSync(folder, { recursive: true, force: true });
  });

  /** The service listening while its embedder probe (memory.embeddings auto, nothing recorded) is held; a start that waited for it would pick the local embedder on its time-out. */
  async function startHeld(env: NodeJS.ProcessEnv = {}): Promise<TestService> {
    const started = await startTestService({ llm, listeningOnly: true, env: { LLM_BASE_URL: gate.url, MEMORY_USE_LONG_TERM: 'true', ...env } });
    await gate.held;
    return started;
  }

  it('answers /health while the embedder probe waits, naming long_term_memory as starting', async () => {
    harness = await startHeld({ MEMORY_EMBEDDINGS_TIMEOUT_MS: '10000' });
    expect(await health(harness)).to.deep.include({ status: 'ok', starting: ['long_term_memory'] });
    gate.open();
    await harness.service.started;
    expect((await health(harness)).starting).to.deep.equal([]);
  });

  it('runs a memory turn sent while the probe waits with the embedder it chose, and recalls it later', async () => {
    harness = await startHeld({ MEMORY_EMBEDDINGS_TIMEOUT_MS: '10000' });
    harness.service.server.once('request', () => gate.open());
    const events = harness.service.events;
    const consolidated = new Promise<void>((resolve) => {
      const stop = events.on('memory:written', (event) => {
        if (event.kind !== 'long_term') return;
        stop();
        resolve();
      });
    });
    expect((await say(harness, 'Please remember that my cat is called Miso.')).status).to.equal(200);
    await consolidated;

    // Another conversation of the same user: the memory is recalled through the LLM server's embeddings.
    expect((await say(harness, "What is my cat's name?")).status).to.equal(200);
    const chat = llm.requests.filter((request) => request.kind === 'chat').at(-1)!;
    expect(String(chat.body.messages![1]!.content)).to.match(/^Relevant memories/).and.include('my cat is called Miso');
    expect(llm.requests.find((request) => request.kind === 'embeddings')!.body.input).to.deep.equal(['probe']);
  });

  it('uses the embedder another process recorded while its probe waited, whatever the probe found: one embedder per database', async () => {
    harness = await startHeld();
    // Meanwhile another process chose the local embedder and stored memories with it.
    const { db } = harness.service.database;
    await createEmbedderRecordRepository(db).record({ source: 'local', model: null });
    const [embedding] = await createLocalEmbedder(harness.config.memory.embedding_dimensions).embed(['likes tea']);
    await createMemoryRepository(db).add([{ userId: 'ada', sessionId: 'elsewhere', content: 'likes tea', embedding: embedding! }]);
    gate.open();
    await harness.service.started;

    // The probe found the LLM server's embeddings; the record stands, and this process recalls with the local embedder.
    const response = await say(harness, 'Do I like tea?');
    expect(response.status).to.equal(200);
    expect(await createEmbedderRecordRepository(db).get()).to.deep.equal({ source: 'local', model: null });
    expect(llm.requests.filter((request) => request.kind === 'embeddings').map((request) => request.body.input)).to.deep.equal([['probe']]);
    const chat = llm.requests.filter((request) => request.kind === 'chat').at(-1)!;
    expect(JSON.stringify(chat.body.messages)).to.include('likes tea');
  });

  it('closes without waiting for the probe, recording nothing: the next start asks the LLM server again', async () => {
    const env = { DATA_DIR: join(folder, 'data'), MEMORY_EMBEDDINGS_TIMEOUT_MS: '120000' };
    // A close that waited for the probe would outlast the test's time-out.
    const held = await startHeld(env);
    await held.close();

    gate.open();
    llm.reset();
    harness = await startTestService({ llm, env: { LLM_BASE_URL: gate.url, MEMORY_USE_LONG_TERM: 'true', ...env } });
    expect(llm.requests.filter((request) => request.kind === 'embeddings').map((request) => request.body.input)).to.deep.equal([['probe']]);
  });
});
