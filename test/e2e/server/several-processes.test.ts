import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import pg from 'pg';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { servePgliteOverSocket } from '../../support/databases.js';
import { createServerSchema } from '../../support/server-schema.js';
import { chatOverFetch, startTestService, type ChatTurnMessage, type TestService } from '../../support/service-harness.js';

type SharedDatabase = { name: string; open(): Promise<{ url: string; close(): Promise<void> }> };

/** Two services on one database stand for two workers or two instances. */
const databases: SharedDatabase[] = [
  {
    name: 'PGlite over pglite-socket',
    open: () => servePgliteOverSocket(),
  },
];
if (process.env.TEST_DATABASE_URL) {
  const baseUrl = process.env.TEST_DATABASE_URL;
  databases.push({
    name: 'the PostgreSQL server',
    open: async () => {
      const schema = await createServerSchema(baseUrl, 'processes');
      return { url: schema.url, close: schema.drop };
    },
  });
}

type ResponseBody = { id: string; error?: { param?: string } };

async function respond(service: TestService, request: Record<string, unknown>): Promise<{ status: number; body: ResponseBody }> {
  const response = await fetch(`${service.baseURL}/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(request) });
  return { status: response.status, body: (await response.json()) as ResponseBody };
}

async function transcript(url: string, sessionId: string): Promise<Array<{ role: string; message: string }>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query('select role, message from conversations where session_id = $1 order by id', [sessionId]);
    return rows;
  } finally {
    await client.end();
  }
}

for (const shared of databases) {
  describe(`two service processes on ${shared.name}`, function () {
    this.timeout(60_000);
    let llm: FakeLlm;
    let database: { url: string; close(): Promise<void> };
    let first: TestService;
    let second: TestService;

    before(async () => {
      llm = await startFakeLlm();
      database = await shared.open();
      const env = { DB_URL: database.url, DB_POOL_SIZE: '4', SESSIONS_LEASE_MS: '1500' };
      first = await startTestService({ llm, env });
      second = await startTestService({ llm, env });
    });
    after(async () => {
      await first?.close();
      await second?.close();
      await database?.close();
      await llm?.close();
    });
    afterEach(() => llm.reset());

    it('continues a resent history on either process without forking, from the newest state', async () => {
      const history: ChatTurnMessage[] = [];
      let sessionId: string | null = null;
      for (let turn = 1; turn <= 6; turn += 1) {
        history.push({ role: 'user', content: `turn ${turn}` });
        // Alternating processes: each has the session's actor cached from two turns before.
        const reply = await chatOverFetch(turn % 2 === 1 ? first : second, history);
        expect(reply.status).to.equal(200);
        sessionId ??= reply.sessionId;
        expect(reply.sessionId, `turn ${turn} forked`).to.equal(sessionId);
        history.push({ role: 'assistant', content: reply.content });
      }
      const stored = await transcript(database.url, sessionId!);
      expect(stored.map((row) => row.message)).to.deep.equal(history.map((message) => message.content));
    });

    it('continues a response on either process, and not once the other process deleted it', async () => {
      const created = await respond(first, { input: 'one' });
      // The first process caches the session, with this response as its newest.
      const continued = await respond(second, { input: 'two', previous_response_id: created.body.id });
      expect(continued.status).to.equal(200);
      const newest = await respond(first, { input: 'three', previous_response_id: continued.body.id });
      expect(newest.status).to.equal(200);
      const deleted = await fetch(`${second.baseURL}/responses/${newest.body.id}`, { method: 'DELETE' });
      expect(deleted.status).to.equal(200);
      const refused = await respond(first, { input: 'four', previous_response_id: newest.body.id });
      expect(refused.status).to.equal(404);
      expect(refused.body.error?.param).to.equal('previous_response_id');
    });

    it('runs the turns of one session one at a time across processes, each stored once and in order', async () => {
      const sessionId = randomUUID();
      llm.setBehaviour({ pieceDelayMs: 20 });
      let inFlight = 0;
      let overlapped = false;
      llm.on('request', () => {
        inFlight += 1;
        if (inFlight > 1) overlapped = true;
      });
      const settle = () => {
        inFlight -= 1;
      };
      llm.on('finish', settle).on('abort', settle);
      const replies = await Promise.all(
        Array.from({ length: 8 }, (_, index) => chatOverFetch(index % 2 === 0 ? first : second, [{ role: 'user', content: `message ${index}` }], sessionId)),
      );
      expect(replies.map((reply) => reply.status)).to.deep.equal(Array(8).fill(200));
      expect(overlapped, 'two turns of the session reached the LLM at once').to.equal(false);
      const stored = await transcript(database.url, sessionId);
      expect(stored).to.have.length(16);
      for (let index = 0; index < stored.length; index += 2) {
        expect(stored[index]!.role).to.equal('user');
        expect(stored[index + 1]).to.deep.equal({ role: 'assistant', message: `Echo: ${stored[index]!.message}` });
      }
      expect(new Set(stored.filter((row) => row.role === 'user').map((row) => row.message)).size).to.equal(8);
    });

    it("keeps the snapshot of the process that took over a lapsed lease when the first one's turn ends late", async () => {
      const sessionId = randomUUID();
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      try {
        const late = chatOverFetch(first, [{ role: 'user', content: 'slow one [[slow:1500]]' }], sessionId);
        await llm.waitForRequest((request) => JSON.stringify(request.body.messages ?? []).includes('slow one'));
        // The first process's lease lapses, as in a database outage longer than the lease.
        await client.query(`update session_leases set expires_at = now() - interval '1 second' where session_id = $1`, [sessionId]);
        const meanwhile = await chatOverFetch(second, [{ role: 'user', content: 'meanwhile' }], sessionId);
        expect(meanwhile).to.include({ status: 200, content: 'Echo: meanwhile' });
        const afterSecond = await client.query('select history_hash, snapshot from sessions where session_id = $1', [sessionId]);

        expect(await late).to.include({ status: 200, content: 'Echo: slow one [[slow:1500]]' });
        const afterFirst = await client.query('select history_hash, snapshot from sessions where session_id = $1', [sessionId]);
        expect(afterFirst.rows[0]).to.deep.equal(afterSecond.rows[0]);
        // Acknowledged, so stored, after the turn that ran meanwhile.
        expect((await transcript(database.url, sessionId)).map((row) => row.message)).to.deep.equal(['slow one [[slow:1500]]', 'meanwhile', 'Echo: meanwhile', 'Echo: slow one [[slow:1500]]']);

        // The first process continues from what is stored, under a lease of its own again.
        expect(await chatOverFetch(first, [{ role: 'user', content: 'and now' }], sessionId)).to.include({ status: 200, content: 'Echo: and now' });
        const lease = await client.query('select generation from session_leases where session_id = $1', [sessionId]);
        expect(Number(lease.rows[0].generation)).to.equal(3);
        const final = await client.query('select history_hash from sessions where session_id = $1', [sessionId]);
        expect(final.rows[0].history_hash).to.not.equal(afterSecond.rows[0].history_hash);
      } finally {
        await client.end();
      }
    });

    it('takes over a session whose holder died once its lease lapses', async () => {
      const sessionId = randomUUID();
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      try {
        await client.query(`insert into session_leases (session_id, holder, generation, expires_at) values ($1, 'a-dead-process', 1, now() + interval '1200 milliseconds')`, [
          sessionId,
        ]);
      } finally {
        await client.end();
      }
      const started = Date.now();
      const reply = await chatOverFetch(first, [{ role: 'user', content: 'are you there?' }], sessionId);
      expect(reply).to.include({ status: 200, content: 'Echo: are you there?' });
      expect(Date.now() - started).to.be.greaterThan(900);
    });

    it('keeps the lease while the actor is cached: turns on one process leave the lease row as it was', async () => {
      const sessionId = randomUUID();
      for (const content of ['one', 'two', 'three']) expect(await chatOverFetch(first, [{ role: 'user', content }], sessionId)).to.include({ status: 200, content: `Echo: ${content}` });
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      try {
        const lease = await client.query('select generation, expires_at > now() as held from session_leases where session_id = $1', [sessionId]);
        expect(lease.rows).to.deep.equal([{ generation: '1', held: true }]);
      } finally {
        await client.end();
      }
    });

    it('gives a request whose Idempotency-Key the other process is running that request’s answer, from one turn', async () => {
      const headers = { 'Content-Type': 'application/json', 'Idempotency-Key': randomUUID() };
      const body = JSON.stringify({ messages: [{ role: 'user', content: 'once only [[slow:600]]' }] });
      const running = fetch(`${first.baseURL}/chat/completions`, { method: 'POST', headers, body });
      await llm.waitForRequest();
      const waiting = await fetch(`${second.baseURL}/chat/completions`, { method: 'POST', headers, body });
      const answered = await running;
      expect(answered.status).to.equal(200);
      expect(waiting.status).to.equal(200);
      expect(waiting.headers.get('idempotent-replayed')).to.equal('true');
      expect(waiting.headers.get('x-session-id')).to.equal(answered.headers.get('x-session-id'));
      expect(await waiting.text()).to.equal(await answered.text());
      expect(llm.requests.filter((request) => request.kind === 'chat')).to.have.length(1);
      expect((await transcript(database.url, answered.headers.get('x-session-id')!)).map((row) => row.message)).to.deep.equal([
        'once only [[slow:600]]',
        'Echo: once only [[slow:600]]',
      ]);
    });
  });
}

/**
 * A lease far longer than the wait for a busy session: a request on another process is
 * served only because the holder hands the session over when asked (PostgreSQL's
 * notifications), not because the lease ran out.
 */
if (process.env.TEST_DATABASE_URL) {
  const baseUrl = process.env.TEST_DATABASE_URL;
  describe('a session cached by one process, asked for by another (PostgreSQL server)', function () {
    this.timeout(60_000);
    let llm: FakeLlm;
    let schema: { url: string; drop(): Promise<void> };
    let first: TestService;
    let second: TestService;

    before(async () => {
      llm = await startFakeLlm();
      schema = await createServerSchema(baseUrl, 'handover');
      const env = { DB_URL: schema.url, DB_POOL_SIZE: '4', SESSIONS_LEASE_MS: '60000', SESSIONS_TURN_WAIT_MS: '5000' };
      first = await startTestService({ llm, env });
      second = await startTestService({ llm, env });
    });
    after(async () => {
      await first?.close();
      await second?.close();
      await schema?.drop();
      await llm?.close();
    });

    it('is handed over at once, back and forth, each turn continuing from the one before', async () => {
      const sessionId = randomUUID();
      const services = [first, second, first, second];
      for (const [index, service] of services.entries()) {
        const reply = await chatOverFetch(service, [{ role: 'user', content: `turn ${index + 1}` }], sessionId);
        expect(reply, `turn ${index + 1}`).to.include({ status: 200, content: `Echo: turn ${index + 1}` });
      }
      const lastContext = llm.requests.at(-1)!.body.messages as ChatTurnMessage[];
      expect(lastContext.filter((message) => message.role === 'user').map((message) => message.content)).to.deep.equal(['turn 1', 'turn 2', 'turn 3', 'turn 4']);
      expect((await transcript(schema.url, sessionId)).map((row) => row.message)).to.deep.equal(
        ['turn 1', 'Echo: turn 1', 'turn 2', 'Echo: turn 2', 'turn 3', 'Echo: turn 3', 'turn 4', 'Echo: turn 4'],
      );
    });

    it('waits for the turn running on the holder, then is served', async () => {
      const sessionId = randomUUID();
      expect(await chatOverFetch(first, [{ role: 'user', content: 'warm up' }], sessionId)).to.include({ status: 200 });
      const slow = chatOverFetch(first, [{ role: 'user', content: 'slow [[slow:800]]' }], sessionId);
      await llm.waitForRequest((request) => JSON.stringify(request.body.messages ?? []).includes('slow [[slow:800]]'));
      const other = await chatOverFetch(second, [{ role: 'user', content: 'from the other process' }], sessionId);
      expect(other).to.include({ status: 200, content: 'Echo: from the other process' });
      expect(await slow).to.include({ status: 200 });
      const stored = (await transcript(schema.url, sessionId)).map((row) => row.message);
      expect(stored.slice(2)).to.deep.equal(['slow [[slow:800]]', 'Echo: slow [[slow:800]]', 'from the other process', 'Echo: from the other process']);
    });
  });
}
