import { randomBytes, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import pg from 'pg';
import winston from 'winston';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { coreMigrations } from '../../../storage/migrations.js';
import { PgBouncer } from '../../support/pgbouncer.js';
import { chatOverFetch, startTestService, type ChatTurnMessage, type TestService } from '../../support/service-harness.js';


/** A logger that keeps the warnings, for the test to read. */
function warningLogger(): { logger: winston.Logger; warnings: string[]; next(pattern: RegExp): Promise<string> } {
  const warnings: string[] = [];
  const waiting: Array<{ pattern: RegExp; resolve: (line: string) => void }> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      const line = chunk.toString('utf8');
      warnings.push(line);
      for (const waiter of waiting.filter((each) => each.pattern.test(line))) waiter.resolve(line);
      done();
    },
  });
  return {
    logger: winston.createLogger({ level: 'warn', format: winston.format.printf((info) => String(info.message)), transports: [new winston.transports.Stream({ stream: sink })] }),
    warnings,
    next: (pattern) => new Promise((resolve) => {
      const seen = warnings.find((line) => pattern.test(line));
      if (seen) resolve(seen);
      else waiting.push({ pattern, resolve });
    }),
  };
}

async function query<Row>(url: string, text: string, values: unknown[] = []): Promise<Row[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text, values)).rows as Row[];
  } finally {
    await client.end();
  }
}

/**
 * Two instances whose pools go through PgBouncer in transaction mode (Debian's, 1.18: no
 * protocol-level prepared statements), with fewer server connections than the two pools have
 * clients, and whose LISTEN connections go straight to the server (database.listen_url).
 */
if (process.env.TEST_DATABASE_URL) {
  const serverUrl = new URL(process.env.TEST_DATABASE_URL);
  describe('two service instances through PgBouncer in transaction mode', function () {
    this.timeout(60_000);
    const database = `svc_bouncer_${randomBytes(6).toString('hex')}`;
    const directUrl = new URL(serverUrl);
    directUrl.pathname = `/${database}`;
    let llm: FakeLlm;
    let bouncer: PgBouncer | undefined;
    let created = false;
    let first: TestService;
    let second: TestService;
    const firstLog = warningLogger();
    const secondLog = warningLogger();

    before(async () => {
      llm = await startFakeLlm();
      await query(serverUrl.toString(), `create database ${database}`);
      created = true;
      bouncer = await PgBouncer.start({ server: { host: serverUrl.hostname, port: Number(serverUrl.port || 5432) }, database, poolSize: 3 });
      const env = { DB_URL: bouncer.url, DB_LISTEN_URL: directUrl.toString(), DB_POOL_SIZE: '4', SESSIONS_LEASE_MS: '60000', SESSIONS_TURN_WAIT_MS: '5000' };
      // Started together: their migrations race for the lock.
      [first, second] = await Promise.all([startTestService({ llm, env, logger: firstLog.logger }), startTestService({ llm, env, logger: secondLog.logger })]);
    });
    after(async () => {
      await first?.close();
      await second?.close();
      await bouncer?.stop();
      if (created) await query(serverUrl.toString(), `drop database if exists ${database} with (force)`);
      await llm?.close();
    });

    it('migrates once at the two starts, and no server process keeps the migration lock', async () => {
      const applied = await query<{ name: string }>(directUrl.toString(), 'select name from kysely_migration order by name');
      expect(applied.map((row) => row.name)).to.deep.equal(Object.keys(coreMigrations).sort());
      const locks = await query<{ count: number }>(
        directUrl.toString(),
        `select count(*)::int as count from pg_locks where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())`,
      );
      expect(locks[0]!.count).to.equal(0);
    });

    it('answers turns on both instances, continuing each session', async () => {
      for (const service of [first, second]) {
        const opened = await chatOverFetch(service, [{ role: 'user', content: 'hello' }]);
        expect(opened).to.include({ status: 200, content: 'Echo: hello' });
        const continued = await chatOverFetch(service, [{ role: 'user', content: 'again' }], opened.sessionId!);
        expect(continued).to.include({ status: 200, content: 'Echo: again', sessionId: opened.sessionId });
      }
    });

    it('hands a session over between the instances at once, the lease being far longer than the wait', async () => {
      const sessionId = randomUUID();
      for (const [index, service] of [first, second, first, second].entries()) {
        const reply = await chatOverFetch(service, [{ role: 'user', content: `turn ${index + 1}` }], sessionId);
        expect(reply, `turn ${index + 1}`).to.include({ status: 200, content: `Echo: turn ${index + 1}` });
      }
      const lastContext = llm.requests.at(-1)!.body.messages as ChatTurnMessage[];
      expect(lastContext.filter((message) => message.role === 'user').map((message) => message.content)).to.deep.equal(['turn 1', 'turn 2', 'turn 3', 'turn 4']);
    });

    it('commits concurrent turns together (group commit), each stored once, with their prepared statements', async () => {
      const sessions = Array.from({ length: 32 }, () => randomUUID());
      const replies = await Promise.all(sessions.map((sessionId, index) => chatOverFetch(index % 2 === 0 ? first : second, [{ role: 'user', content: `message ${index}` }], sessionId)));
      expect(replies.map((reply) => reply.status)).to.deep.equal(Array(sessions.length).fill(200));
      const stored = await query<{ session_id: string; role: string; message: string; commit: string }>(
        directUrl.toString(),
        'select session_id, role, message, xmin::text as commit from conversations where session_id = any($1) order by id',
        [sessions],
      );
      expect(stored).to.have.length(2 * sessions.length);
      for (const [index, sessionId] of sessions.entries()) {
        expect(stored.filter((row) => row.session_id === sessionId).map((row) => row.message)).to.deep.equal([`message ${index}`, `Echo: message ${index}`]);
      }
      // Messages of several turns stored by one transaction: a batch.
      const userMessages = stored.filter((row) => row.role === 'user');
      expect(new Set(userMessages.map((row) => row.commit)).size).to.be.lessThan(userMessages.length);
    });

    it('warns in one line at start when database.url loses notifications and listen_url is not set, and not otherwise', async () => {
      const thirdLog = warningLogger();
      const third = await startTestService({ llm, env: { DB_URL: bouncer!.url, DB_POOL_SIZE: '2' }, logger: thirdLog.logger });
      try {
        const warning = await thirdLog.next(/notifications/);
        expect(warning).to.match(/^database\.url loses notifications .* set database\.listen_url \(DB_LISTEN_URL\)/);
        expect(thirdLog.warnings).to.have.length(1);
      } finally {
        await third.close();
      }
      // The two instances started before this one: their checks ended long ago.
      expect([...firstLog.warnings, ...secondLog.warnings]).to.deep.equal([]);
    });
  });
}
