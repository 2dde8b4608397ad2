import { expect } from 'chai';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { loadConfig } from '../../../config/load-config.js';
import { startService } from '../../../gateway/server/service.js';
import { servePgliteOverSocket } from '../../support/databases.js';
import { startTestService, testLogger, type TestService } from '../../support/service-harness.js';
import { serviceStorageTargets, type StorageTarget } from '../../support/service-storage.js';

const FILLER_TOPICS = ['weather', 'trains', 'cooking', 'chess', 'gardening', 'music', 'astronomy', 'football', 'poetry', 'painting'];

async function say(harness: TestService, text: string, headers: Record<string, string>): Promise<{ content: string; sessionId: string }> {
  const response = await fetch(`${harness.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify({ messages: [{ role: 'user', content: text }] }),
  });
  expect(response.status).to.equal(200);
  const body = (await response.json()) as { choices: Array<{ message: { content: string } }> };
  return { content: body.choices[0]!.message.content, sessionId: response.headers.get('x-session-id')! };
}

/** The system messages the LLM received in its last chat call. */
function lastSystemText(llm: FakeLlm): string {
  const request = [...llm.requests].reverse().find((candidate) => candidate.kind === 'chat')!;
  return request.body.messages!.filter((message) => message.role === 'system').map((message) => String(message.content)).join('\n');
}

/** The embedded database, the PostgreSQL server (with TEST_DATABASE_URL), and the pg driver to PGlite's pgvector over the wire protocol. */
const backends: StorageTarget[] = [
  ...serviceStorageTargets(),
  {
    name: 'pg driver to real pgvector (pglite-socket)',
    prepare: async () => {
      const socket = await servePgliteOverSocket({ vector: true });
      return { env: { DB_URL: socket.url }, cleanup: socket.close };
    },
  },
];

for (const backend of backends) {
  describe(`long-term memory (${backend.name})`, () => {
    let llm: FakeLlm;
    let harness: TestService;
    let database: { env: NodeJS.ProcessEnv; cleanup(): Promise<void> };

    before(async () => {
      llm = await startFakeLlm();
      database = await backend.prepare();
      harness = await startTestService({
        llm,
        env: { ...database.env, MEMORY_USE_LONG_TERM: 'true', MEMORY_SHORT_TERM_TURNS: '6', MEMORY_LONG_TERM_RESULTS: '3' },
      });
    });
    after(async () => {
      await harness?.close();
      await database?.cleanup();
      await llm?.close();
    });

    it('recalls a fact stated 50 turns earlier, right after the system prompt', async () => {
      const headers = { 'X-User-ID': 'ada' };
      const { sessionId } = await say(harness, 'Please note: my favourite colour is teal.', headers);
      for (let turn = 0; turn < 50; turn += 1) {
        const topic = FILLER_TOPICS[turn % FILLER_TOPICS.length];
        await say(harness, `Tell me something about ${topic} number ${turn}.`, { ...headers, 'X-Session-ID': sessionId });
      }
      await say(harness, 'What is my favourite colour?', { ...headers, 'X-Session-ID': sessionId });
      const request = [...llm.requests].reverse().find((candidate) => candidate.kind === 'chat')!;
      const messages = request.body.messages!;
      // Too old for the short-term window...
      expect(messages.filter((message) => message.role !== 'system').map((message) => String(message.content))).to.not.include(
        'Please note: my favourite colour is teal.',
      );
      // ...but recalled into the memory message right after the system prompt.
      expect(messages[0]!.content).to.equal('You are a helpful assistant.');
      expect(String(messages[1]!.content)).to.match(/^Relevant memories/).and.include('favourite colour is teal');
    });

    it('recalls a user\'s memories in their new sessions but never for another user', async () => {
      await say(harness, 'I keep my bicycle in the blue shed.', { 'X-User-ID': 'grace' });
      await say(harness, 'Where is my bicycle kept?', { 'X-User-ID': 'grace' });
      expect(lastSystemText(llm)).to.include('bicycle in the blue shed');
      await say(harness, 'Where is my bicycle kept?', { 'X-User-ID': 'mallory' });
      expect(lastSystemText(llm)).to.not.include('blue shed');
    });
  });
}

describe('long-term memory start-up check', () => {
  it('stops start-up with a clear message when DB_URL names a server without the vector extension', async () => {
    // PGlite behind the wire protocol, without pgvector loaded: a server that lacks the extension.
    const server = await servePgliteOverSocket();
    try {
      const config = loadConfig({ APP_PORT: '0', DB_URL: server.url, MEMORY_USE_LONG_TERM: 'true' });
      let failure: Error | undefined;
      await startService(config, testLogger()).then(
        (service) => service.close(),
        (error: Error) => (failure = error),
      );
      expect(failure?.message).to.match(/PostgreSQL server \(version \d+/).and.match(/"vector" extension/);
    } finally {
      await server.close();
    }
  });
});
