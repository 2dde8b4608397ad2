import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import winston from 'winston';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { expectSchema } from '../../support/openai-schema.js';
import { startTestService, type TestService } from '../../support/service-harness.js';
import { waitFor } from '../../support/wait-for.js';

/** A PostgreSQL server (PGlite over the wire protocol) that can be stopped and started on its port. */
class StoppableDatabase {
  private server: PGLiteSocketServer | undefined;
  port = 0;

  constructor(private readonly pglite: PGlite) {}

  get url(): string {
    return `postgres://postgres:postgres@127.0.0.1:${this.port}/postgres`;
  }

  async start(): Promise<void> {
    this.server = new PGLiteSocketServer({ db: this.pglite, host: '127.0.0.1', port: this.port, maxConnections: 40 });
    await this.server.start();
    this.port = Number(this.server.getServerConn().split(':').at(-1));
  }

  async stop(): Promise<void> {
    await this.server?.stop();
    this.server = undefined;
  }
}

type Acknowledged = { sessionId: string; user: string; reply: string };

describe('database outage', () => {
  let llm: FakeLlm;
  let pglite: PGlite;
  let database: StoppableDatabase;
  let harness: TestService;

  before(async () => {
    llm = await startFakeLlm();
    pglite = await PGlite.create('memory://');
    database = new StoppableDatabase(pglite);
    await database.start();
    harness = await startTestService({ llm, env: { DB_URL: database.url, SESSIONS_WRITE_WAIT_MS: '300', DB_POOL_SIZE: '4' } });
  });
  after(async () => {
    await harness?.close();
    await database?.stop();
    await pglite?.close();
    await llm?.close();
  });

  async function send(text: string, sessionId?: string): Promise<{ status: number; reply: string; sessionId: string | null }> {
    const response = await fetch(`${harness.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-User-ID': 'durable', ...(sessionId ? { 'X-Session-ID': sessionId } : {}) },
      body: JSON.stringify({ messages: [{ role: 'user', content: text }] }),
    });
    const body = (await response.json()) as { choices?: Array<{ message: { content: string } }>; error?: { type: string } };
    expectSchema(response.ok ? 'CreateChatCompletionResponse' : 'ErrorResponse', body);
    return { status: response.status, reply: body.choices?.[0]?.message.content ?? '', sessionId: response.headers.get('x-session-id') };
  }

  async function countRows(sessionId: string, role: string, message: string): Promise<number> {
    const row = await harness.service.database.db
      .selectFrom('conversations')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .where('session_id', '=', sessionId)
      .where('role', '=', role)
      .where('message', '=', message)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  it('loses no acknowledged message when the database stops and restarts during a run of requests', async () => {
    const acknowledged: Acknowledged[] = [];
    const refused: number[] = [];
    const sessions: Array<string | undefined> = [undefined, undefined, undefined];
    for (let index = 0; index < 30; index += 1) {
      if (index === 10) await database.stop();
      if (index === 20) await database.start();
      const slot = index % sessions.length;
      const text = `message ${index}`;
      const result = await send(text, sessions[slot]);
      if (result.status === 200) {
        sessions[slot] ??= result.sessionId!;
        acknowledged.push({ sessionId: result.sessionId!, user: text, reply: result.reply });
      } else {
        expect(result.status).to.equal(503);
        refused.push(index);
      }
    }
    // The outage was real: some requests were refused, and none was answered wrongly.
    expect(refused.length).to.be.greaterThan(0);
    expect(acknowledged.length).to.be.at.least(20);
    await harness.service.writer.flush();
    for (const turn of acknowledged) {
      expect(await countRows(turn.sessionId, 'user', turn.user), turn.user).to.equal(1);
      expect(await countRows(turn.sessionId, 'assistant', turn.reply), turn.reply).to.equal(1);
    }
  });

  it('stores a turn exactly once when the database goes away while the LLM is answering', async () => {
    const { sessionId } = await send('before the outage');
    llm.script({ match: { lastUserIncludes: 'during' }, reply: { content: 'answered during the outage', delayMs: 300 } });
    const pending = send('asked during the outage', sessionId!);
    await llm.waitForRequest((request) => JSON.stringify(request.body.messages ?? []).includes('asked during'));
    await database.stop();
    const result = await pending;
    expect(result.status).to.equal(200);
    expect(result.reply).to.equal('answered during the outage');
    await database.start();
    await harness.service.writer.flush();
    expect(await countRows(sessionId!, 'user', 'asked during the outage')).to.equal(1);
    expect(await countRows(sessionId!, 'assistant', 'answered during the outage')).to.equal(1);
  });

  it('answers every Responses API route with 503 database_unavailable and Retry-After while the database is down', async () => {
    const call = (method: string, path: string, body?: Record<string, unknown>) =>
      fetch(`${harness.baseURL}${path}`, {
        method,
        headers: { 'Content-Type': 'application/json', 'X-User-ID': 'durable' },
        ...(body ? { body: JSON.stringify({ model: 'svc-agent', ...body }) } : {}),
      });
    const done = await call('POST', '/responses', { input: 'before the outage' });
    expect(done.status).to.equal(200);
    const { id } = (await done.json()) as { id: string };
    const conversation = done.headers.get('x-session-id')!;
    const background = (await (await call('POST', '/responses', { input: 'in the background before the outage', background: true })).json()) as { id: string };
    await waitFor(async () => ((await (await call('GET', `/responses/${background.id}`)).json()) as { status: string }).status === 'completed', 'the background response to end');

    const routes: Array<[string, string, Record<string, unknown>?]> = [
      ['POST', '/responses', { input: 'during the outage' }],
      ['POST', '/responses', { input: 'during the outage', stream: true }],
      ['POST', '/responses', { input: 'during the outage', background: true }],
      ['POST', '/responses', { input: 'during the outage', background: true, stream: true }],
      ['POST', '/responses', { input: 'during the outage', previous_response_id: id }],
      ['POST', '/responses', { input: 'during the outage', conversation }],
      ['GET', `/responses/${id}`],
      ['GET', `/responses/${background.id}?stream=true`],
      ['GET', `/responses/${id}/input_items`],
      ['POST', `/responses/${background.id}/cancel`],
      ['DELETE', `/responses/${id}`],
    ];
    const routeOf = ([method, path, body]: (typeof routes)[number]) => `${method} ${path}${body ? ` ${JSON.stringify(body)}` : ''}`;
    const answers: Array<Record<string, unknown>> = [];
    await database.stop();
    try {
      for (const route of routes) {
        const answer = await call(...route);
        const body = (await answer.json()) as { error?: { type: string; code: string } };
        if (!answer.ok) expectSchema('ErrorResponse', body);
        answers.push({ route: routeOf(route), status: answer.status, retryAfter: answer.headers.get('retry-after'), type: body.error?.type, code: body.error?.code });
      }
    } finally {
      await database.start();
    }
    expect(answers).to.deep.equal(routes.map((route) => ({ route: routeOf(route), status: 503, retryAfter: '1', type: 'server_busy_error', code: 'database_unavailable' })));
    // Nothing was changed meanwhile, and the routes answer again.
    await waitFor(async () => (await call('GET', `/responses/${id}`)).status === 200, 'the response to be readable again');
    expect((await call('DELETE', `/responses/${id}`)).status).to.equal(200);
  });

  it('answers the Conversations API with 503 database_unavailable and Retry-After while the database is down, as every route does', async () => {
    const call = (method: string, path: string, body?: Record<string, unknown>) =>
      fetch(`${harness.baseURL}${path}`, {
        method,
        headers: { 'Content-Type': 'application/json', 'X-User-ID': 'durable' },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
    const created = await call('POST', '/conversations', { items: [{ type: 'message', role: 'user', content: 'before the outage' }] });
    expect(created.status).to.equal(200);
    const { id } = (await created.json()) as { id: string };
    const routes: Array<[string, string, Record<string, unknown>?]> = [
      ['POST', '/conversations', {}],
      ['GET', `/conversations/${id}`],
      ['POST', `/conversations/${id}`, { metadata: { topic: 'outage' } }],
      ['GET', `/conversations/${id}/items`],
      ['DELETE', `/conversations/${id}`],
    ];
    const routeOf = ([method, path]: (typeof routes)[number]) => `${method} ${path}`;
    const answers: Array<Record<string, unknown>> = [];
    await database.stop();
    try {
      for (const route of routes) {
        const answer = await call(...route);
        const body = (await answer.json()) as { error?: { type: string; code: string } };
        answers.push({ route: routeOf(route), status: answer.status, retryAfter: answer.headers.get('retry-after'), code: body.error?.code });
      }
    } finally {
      await database.start();
    }
    expect(answers).to.deep.equal(routes.map((route) => ({ route: routeOf(route), status: 503, retryAfter: '1', code: 'database_unavailable' })));
    await waitFor(async () => (await call('GET', `/conversations/${id}`)).status === 200, 'the conversation to be readable again');
  });
});

describe('stopping while the database is down', function () {
  this.timeout(60_000);

  it("stops within app.shutdown_timeout_ms (and the writes' floor) though a turn's reply write keeps failing, saying which writes it gave up", async () => {
    const llm = await startFakeLlm();
    const pglite = await PGlite.create('memory://');
    const database = new StoppableDatabase(pglite);
    await database.start();
    const lines: string[] = [];
    const logger = winston.createLogger({
      level: 'warn',
      transports: [new winston.transports.Stream({ stream: new Writable({ write: (chunk: Buffer, _encoding, done) => done(void lines.push(chunk.toString())) }) })],
    });
    const harness = await startTestService({ llm, logger, env: { DB_URL: database.url, SESSIONS_WRITE_WAIT_MS: '200', DB_POOL_SIZE: '2', APP_SHUTDOWN_TIMEOUT_MS: '500' } });
    try {
      // The database goes away while the LLM answers: the reply is sent, and its write keeps failing.
      llm.script({ match: { lastUserIncludes: 'during' }, reply: { content: 'answered during the outage', delayMs: 300 } });
      const pending = fetch(`${harness.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-User-ID': 'stuck' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'asked during the outage' }] }),
      });
      await llm.waitForRequest((request) => JSON.stringify(request.body.messages ?? []).includes('asked during'));
      await database.stop();
      expect((await pending).status).to.equal(200);
      const started = Date.now();
      await harness.close();
      // Without a bound it never ended; with it: 500 ms for requests, at least 5 s for the writes, and the stop's other steps.
      expect(Date.now() - started).to.be.below(15_000);
      const given = lines.find((line) => line.includes('not stored'));
      expect(given, lines.join('')).to.match(/\d+ writes? not stored: .*app\.shutdown_timeout_ms, 500 ms\): \d+ × /);
    } finally {
      await database.stop();
      await pglite.close();
      await llm.close();
    }
  });
});
