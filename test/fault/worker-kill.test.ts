import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import OpenAI from 'openai';
import pg from 'pg';
import { freePort, type RunningChild } from '../../scripts/bench/child-process.js';
import { createScratchDatabase, type ScratchDatabase } from '../../scripts/bench/scratch-database.js';
import { startFakeLlm, type FakeLlm, type RecordedRequest } from '../../scripts/fake-llm-server.js';
import { clusterWorkersOf } from '../support/cluster-workers.js';
import { isProcessAlive, waitFor } from '../support/wait-for.js';
import { sendTurn } from './chat-turn.js';
import { startServiceProcess } from './service-process.js';

const WORKERS = 4;
const CONVERSATIONS = 20;
const TURNS = 4;
const LEASE_MS = 2_000;
/** No request may take longer; one that waits for a dead worker's lease takes up to LEASE_MS. */
const REQUEST_BOUND_MS = 15_000;
const ATTEMPTS = 5;
const RETRY_PAUSE_MS = 200;
/** SIGTERM to exit: the workers have no turn in flight by then. */
const STOP_BOUND_MS = 20_000;

/** One attempt at a turn, as the client saw it. */
type Attempt = { sessionId: string; text: string; gotHeaders: boolean; readToDone: boolean; reply: string | null };

/** How many established TCP connections a process holds whose own end is on one of `ports` (Linux: its socket fds matched against /proc/net/tcp). */
function connectionsOf(pid: number, ports: ReadonlySet<number>): number {
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local_address ends with the port in hex; state 01 is ESTABLISHED; the inode is the tenth field.
      const localPort = Number.parseInt(fields[1]?.split(':').at(-1) ?? '', 16);
      if (ports.has(localPort) && fields[3] === '01') inodes.add(fields[9]!);
    }
  }
  const folder = `/proc/${pid}/fd`;
  return readdirSync(folder).filter((fd) => {
    try {
      return inodes.has(/^socket:\[(\d+)\]$/.exec(readlinkSync(join(folder, fd)))?.[1] ?? '');
    } catch {
      return false;
    }
  }).length;
}

/** The requests open at the fake LLM right now, kept up to date until `stop()`. */
function openRequestsAt(llm: FakeLlm): { open: Set<RecordedRequest>; stop: () => void } {
  const open = new Set<RecordedRequest>();
  const add = (record: RecordedRequest) => open.add(record);
  const remove = (record: RecordedRequest) => open.delete(record);
  llm.on('request', add).on('finish', remove).on('abort', remove).on('cut', remove);
  return { open, stop: () => llm.off('request', add).off('finish', remove).off('abort', remove).off('cut', remove) };
}

/**
 * Kills the worker of the primary `primaryPid` that holds the most of `open` (requests open at
 * the LLM, matched by their connections' ports), so the kill surely breaks turns in flight. (Its
 * client connections would not tell: idle keep-alive connections count there too.)
 */
function killBusiestWorker(primaryPid: number, open: ReadonlySet<RecordedRequest>): void {
  const ports = new Set([...open].flatMap((record) => (record.clientPort === undefined ? [] : [record.clientPort])));
  const [victim] = clusterWorkersOf(primaryPid)
    .map((pid) => [pid, connectionsOf(pid, ports)] as const)
    .sort((a, b) => b[1] - a[1])[0]!;
  process.kill(victim, 'SIGKILL');
}

const serverUrl = process.env.TEST_DATABASE_URL;
const suite = serverUrl ? describe : describe.skip;

suite(`a worker killed with SIGKILL in the middle of streams${serverUrl ? '' : ' (skipped: needs TEST_DATABASE_URL)'}`, function () {
  this.timeout(120_000);
  let database: ScratchDatabase;
  let llm: FakeLlm;
  let service: RunningChild;
  let port: number;
  let baseURL: string;

  before(async () => {
    database = await createScratchDatabase(serverUrl!);
    // Each streamed word comes 60 ms after the one before: a turn is open for about half a second.
    llm = await startFakeLlm({ pieceDelayMs: 60 });
    port = await freePort();
    service = await startServiceProcess({
      port,
      llm,
      leaseMs: LEASE_MS,
      env: { APP_WORKERS: String(WORKERS), APP_SHUTDOWN_TIMEOUT_MS: '5000', DB_URL: database.url },
      // The primary says so once every worker listens.
      ready: /workers listening on port/,
    });
    baseURL = `http://127.0.0.1:${port}/v1`;
  });
  after(async () => {
    await service?.stop(2_000);
    await llm?.close();
    await database?.drop();
  });

  /** Sends a turn until it is answered, again after a broken connection, as a user would. */
  async function turnWithRetries(sessionId: string, text: string, attempts: Attempt[]): Promise<void> {
    const failures: string[] = [];
    for (let attempt = 1; attempt <= ATTEMPTS; attempt += 1) {
      const record: Attempt = { sessionId, text, gotHeaders: false, readToDone: false, reply: null };
      attempts.push(record);
      let answer;
      try {
        answer = await sendTurn(baseURL, {
          text,
          stream: true,
          sessionId,
          signal: AbortSignal.timeout(REQUEST_BOUND_MS),
          onHeaders: (status) => {
            record.gotHeaders = status === 200;
          },
        });
      } catch (error) {
        // fetch fails with a TypeError when the connection breaks; anything else (our time-out: a hang) fails the test.
        if (!(error instanceof TypeError)) throw error;
        failures.push(`${error.message} (${String((error.cause as Error | undefined)?.message ?? '')})`);
        // A user tries again a moment later.
        await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
        continue;
      }
      expect(answer.status, `${text}: ${answer.error?.message}`).to.equal(200);
      expect(answer.error, text).to.equal(null);
      record.readToDone = answer.done;
      record.reply = answer.content;
      if (answer.done) return;
    }
    throw new Error(`${text}: not answered in ${ATTEMPTS} attempts: ${failures.join('; ')}`);
  }

  async function transcripts(): Promise<Map<string, string[]>> {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ session_id: string; role: string; message: string }>('select session_id, role, message from conversations order by id');
      const bySession = new Map<string, string[]>();
      for (const row of rows) bySession.set(row.session_id, [...(bySession.get(row.session_id) ?? []), `${row.role}: ${row.message}`]);
      return bySession;
    } finally {
      await client.end();
    }
  }

  /**
   * Sends eight users' first turns with `send` (which tries again as its client does), each LLM
   * answer taking a second; kills the busiest worker once half of them are open at the LLM; then
   * checks that every turn was answered, that the kill broke some, and that each user's message
   * and reply are stored once.
   */
  async function firstTurnsThroughAKill(tag: string, send: (user: string, content: string) => Promise<string>): Promise<void> {
    const primaryPid = service.process.pid!;
    const users = Array.from({ length: 8 }, (_, index) => `${tag}-${index}-${Date.now()}`);
    const atLlm = openRequestsAt(llm);
    let aborted = 0;
    const onAbort = () => (aborted += 1);
    llm.on('abort', onAbort);
    llm.script({ match: { lastUserIncludes: tag }, reply: { delayMs: 1_000 } });
    const turns = Promise.all(users.map((user) => send(user, `<${user}> tell me a little story`)));
    await waitFor(() => atLlm.open.size >= users.length / 2, 'first turns open at the LLM', REQUEST_BOUND_MS);
    killBusiestWorker(primaryPid, atLlm.open);
    const answers = await turns;
    atLlm.stop();
    llm.off('abort', onAbort);
    llm.reset();
    expect(aborted, 'the kill broke first turns in flight').to.be.greaterThan(0);
    expect(answers).to.deep.equal(users.map((user) => `Echo: <${user}> tell me a little story`));
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      for (const user of users) {
        const { rows } = await client.query<{ role: string }>('select role from conversations where user_id = $1 order by id', [user]);
        expect(
          rows.map((row) => row.role),
          `${user}: its message and reply, once`,
        ).to.deep.equal(['user', 'assistant']);
      }
    } finally {
      await client.end();
    }
    await waitFor(() => clusterWorkersOf(primaryPid).length === WORKERS, `${WORKERS} workers again`, REQUEST_BOUND_MS);
  }

  it('stores a first turn the openai SDK retries after its worker died once, in one session, answered', async () => {
    // The SDK as applications use it: its own retries after a broken connection (X-Stainless-Retry-Count).
    const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 4, timeout: REQUEST_BOUND_MS });
    await firstTurnsThroughAKill('sdk-retry', async (user, content) => {
      const completion = await client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content }] }, { headers: { 'X-User-ID': user } });
      return completion.choices[0]!.message.content!;
    });
  });

  it('answers a first turn sent again with its Idempotency-Key after its worker died once, in one session', async () => {
    // A client without the SDK's retry count: it sends the same request, with the same key, until it is answered.
    await firstTurnsThroughAKill('keyed-retry', async (user, content) => {
      const init = {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-User-ID': user, 'Idempotency-Key': `key-${user}` },
        body: JSON.stringify({ messages: [{ role: 'user', content }] }),
      };
      for (let attempt = 1; attempt <= ATTEMPTS; attempt += 1) {
        try {
          const response = await fetch(`${baseURL}/chat/completions`, { ...init, signal: AbortSignal.timeout(REQUEST_BOUND_MS) });
          const body = (await response.json()) as { choices: Array<{ message: { content: string } }> };
          expect(response.status, JSON.stringify(body)).to.equal(200);
          return body.choices[0]!.message.content;
        } catch (error) {
          if (!(error instanceof TypeError)) throw error;
          await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
        }
      }
      throw new Error(`${user}: not answered in ${ATTEMPTS} attempts`);
    });
  });

  it('stores every acknowledged message once and in order (first turns included), leaves no session stuck, and stops cleanly on SIGTERM', async () => {
    const primaryPid = service.process.pid!;
    // The primary logs each replacement worker once it listens.
    const listening = new Set<number>();
    createInterface({ input: service.process.stdout! }).on('line', (line) => {
      const pid = /\(pid (\d+)\) listening/.exec(line)?.[1];
      if (pid) listening.add(Number(pid));
    });
    const attempts: Attempt[] = [];
    const sessionIds = Array.from({ length: CONVERSATIONS }, (_, index) => `worker-kill-${index}-${Date.now()}`);
    const atLlm = openRequestsAt(llm);
    const conversations = Promise.all(
      sessionIds.map(async (sessionId, index) => {
        for (let turn = 1; turn <= TURNS; turn += 1) await turnWithRetries(sessionId, `<c${index}:t${turn}> tell me a little story`, attempts);
      }),
    );

    const workersBefore = clusterWorkersOf(primaryPid);
    const sentOf = (turn: number) => attempts.filter((attempt) => attempt.text.includes(`:t${turn}>`)).length;
    // Killed once while most conversations have their first turn open (a retried first turn must not be stored twice),
    // and once on the second turn.
    await waitFor(() => sentOf(1) >= CONVERSATIONS && atLlm.open.size >= CONVERSATIONS / 2, 'streams open on the first turn', REQUEST_BOUND_MS);
    killBusiestWorker(primaryPid, atLlm.open);
    await waitFor(() => sentOf(2) >= CONVERSATIONS / 2 && atLlm.open.size >= CONVERSATIONS / 4, 'streams open on the second turn', REQUEST_BOUND_MS);
    killBusiestWorker(primaryPid, atLlm.open);
    await conversations;
    atLlm.stop();

    const brokenOnTurn = (turn: number) => attempts.filter((attempt) => !attempt.readToDone && attempt.text.includes(`:t${turn}>`)).length;
    expect(brokenOnTurn(1), 'the first kill broke first turns in flight').to.be.greaterThan(0);
    expect(brokenOnTurn(1) + brokenOnTurn(2), 'the kills broke streams in flight').to.be.greaterThan(1);
    const replaced = () => clusterWorkersOf(primaryPid).filter((pid) => listening.has(pid) && !workersBefore.includes(pid)).length === 2;
    await waitFor(() => replaced() && clusterWorkersOf(primaryPid).length === WORKERS, `two replacement workers listening, ${WORKERS} in all`, REQUEST_BOUND_MS);

    // No session is stuck behind the dead worker's lease.
    await Promise.all(
      sessionIds.map(async (sessionId, index) => {
        const text = `<c${index}:after> still there?`;
        const answer = await sendTurn(baseURL, { text, stream: false, sessionId, signal: AbortSignal.timeout(LEASE_MS + 3_000) });
        expect(answer.content, sessionId).to.equal(`Echo: ${text}`);
        attempts.push({ sessionId, text, gotHeaders: true, readToDone: true, reply: answer.content });
      }),
    );

    const workers = clusterWorkersOf(primaryPid);
    process.kill(primaryPid, 'SIGTERM');
    const exited = () => service.process.exitCode !== null || service.process.signalCode !== null;
    await waitFor(exited, 'the primary to exit after SIGTERM', STOP_BOUND_MS);
    expect(service.process.exitCode, service.tail().join('\n')).to.equal(0);
    expect(workers.filter(isProcessAlive), 'workers still running').to.deep.equal([]);

    const stored = await transcripts();
    const problems: string[] = [];
    for (const sessionId of sessionIds) {
      const rows = stored.get(sessionId) ?? [];
      const mine = attempts.filter((attempt) => attempt.sessionId === sessionId);
      const count = (row: string) => rows.filter((each) => each === row).length;
      // Every turn ends answered, so each stored copy of a message has its reply: a retry after a
      // broken stream adds no copy, unless the first attempt had finished on the server (its reply
      // stored, the stream cut before [DONE]): then the retry is a turn of its own, with its reply.
      for (const text of new Set(mine.map((attempt) => attempt.text))) {
        const users = count(`user: ${text}`);
        const replies = count(`assistant: Echo: ${text}`);
        if (users < 1) problems.push(`${sessionId}: user message '${text}' (answered) not stored`);
        if (users !== replies) problems.push(`${sessionId}: user message '${text}' stored ${users} times, its reply ${replies} times`);
      }
      const userTurns = [...new Set(rows.filter((row) => row.startsWith('user: ')))];
      const sent = [...new Set(mine.map((attempt) => `user: ${attempt.text}`))].filter((row) => userTurns.includes(row));
      if (userTurns.join('|') !== sent.join('|')) problems.push(`${sessionId}: turns stored out of order: ${userTurns.join(', ')}`);
    }
    expect(problems, `${problems.length} problems:\n${problems.join('\n')}\n`).to.deep.equal([]);
  });
});
