import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { readText, sseData, startTestService, type TestService } from '../../support/service-harness.js';

describe('graceful shutdown', function () {
  this.timeout(30_000);
  let llm: FakeLlm;

  before(async () => {
    llm = await startFakeLlm();
  });
  after(async () => {
    await llm?.close();
  });
  afterEach(() => llm.reset());

  function stream(harness: TestService, sessionId: string, content: string): Promise<Response> {
    return fetch(`${harness.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Session-ID': sessionId },
      body: JSON.stringify({ stream: true, messages: [{ role: 'user', content }] }),
    });
  }

  /** Keeps the database open when the service closes, so the stored rows can be read; returns the real close. */
  function keepDatabaseOpen(harness: TestService): () => Promise<void> {
    const { database } = harness.service;
    const close = database.close;
    database.close = async () => undefined;
    return close;
  }

  async function storedRoles(harness: TestService, sessionId: string): Promise<string[]> {
    const rows = await harness.service.database.db.selectFrom('conversations').select('role').where('session_id', '=', sessionId).orderBy('id').execute();
    return rows.map((row) => row.role);
  }

  it('lets a stream in flight finish, stores its reply, and refuses new connections meanwhile', async () => {
    const harness = await startTestService({ llm });
    const closeDatabase = keepDatabaseOpen(harness);
    try {
      llm.setBehaviour({ pieceDelayMs: 60 });
      const sessionId = randomUUID();
      const response = await stream(harness, sessionId, 'one two three four five six seven eight');
      await llm.waitForRequest();
      const closing = harness.service.close();
      const refused = await fetch(`${harness.baseURL}/models`).then(
        () => false,
        () => true,
      );
      const events = sseData(await readText(response));
      await closing;
      expect(refused, 'a new connection was accepted while draining').to.equal(true);
      expect(events.at(-1)).to.equal('[DONE]');
      const text = events
        .slice(0, -1)
        .map((event) => (JSON.parse(event) as { choices: Array<{ delta: { content?: string } }> }).choices[0]?.delta.content ?? '')
        .join('');
      expect(text).to.equal('Echo: one two three four five six seven eight');
      expect(await storedRoles(harness, sessionId)).to.deep.equal(['user', 'assistant']);
    } finally {
      await closeDatabase();
    }
  });

  it('cuts a stream that outlasts the shutdown time-out, and still stores its cancelled turn', async () => {
    const harness = await startTestService({ llm, env: { APP_SHUTDOWN_TIMEOUT_MS: '300' } });
    const closeDatabase = keepDatabaseOpen(harness);
    try {
      llm.setBehaviour({ pieceDelayMs: 400 });
      const sessionId = randomUUID();
      const response = await stream(harness, sessionId, 'a long answer that will not finish in time');
      await llm.waitForRequest();
      const started = Date.now();
      await harness.service.close();
      const body = await readText(response).catch(() => '');
      expect(body).not.to.include('[DONE]');
      expect(Date.now() - started).to.be.below(10_000);
      await llm.waitForAbort();
      expect(await storedRoles(harness, sessionId)).to.deep.equal(['user']);
    } finally {
      await closeDatabase();
    }
  });
});
