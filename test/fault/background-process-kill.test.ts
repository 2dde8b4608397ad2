import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import OpenAI from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import pg from 'pg';
import { freePort, type RunningChild } from '../../scripts/bench/child-process.js';
import { createScratchDatabase, type ScratchDatabase } from '../../scripts/bench/scratch-database.js';
import { startFakeLlm, type FakeLlm } from '../../scripts/fake-llm-server.js';
import { clusterWorkersOf } from '../support/cluster-workers.js';
import { isProcessAlive, waitFor } from '../support/wait-for.js';
import { startServiceProcess } from './service-process.js';

const LEASE_MS = 1_000;
/** The scripted LLM never answers this turn: it runs until its process dies. */
const HANGING_INPUT = 'Think about it for a long time [[hang]]';
/** A turn the scripted LLM does not answer the first time it is asked (`hangOnce`), and answers after. */
const INPUT = 'Think about it';

/** The service on `port` with `env` added, its sessions and runs leased for LEASE_MS. */
function startService(port: number, llm: FakeLlm, env: NodeJS.ProcessEnv): Promise<RunningChild> {
  return startServiceProcess({ port, llm, leaseMs: LEASE_MS, env });
}

/** Every event of a response's stream read again from the start. */
async function replay(client: OpenAI, id: string): Promise<ResponseStreamEvent[]> {
  const events: ResponseStreamEvent[] = [];
  for await (const event of await client.responses.retrieve(id, { stream: true })) events.push(event);
  return events;
}

/** Makes the scripted LLM leave the next request unanswered (until its process dies), and echo after. */
function hangOnce(llm: FakeLlm): void {
  llm.reset();
  llm.script({ reply: { hang: true }, times: 1 });
}

/**
 * What a client sees of a background response whose process died, taken over by another process
 * (or the next start): completed, its events read again from the start those of one response
 * (created once, in progress once, its text once, completed last), its message stored once, and
 * its session goes on from it.
 */
async function expectCompletedAndContinued(client: OpenAI, id: string, databaseUrl?: string): Promise<void> {
  const completed = await waitFor(async () => {
    const response = await client.responses.retrieve(id);
    expect(response.status).to.be.oneOf(['queued', 'in_progress', 'completed']);
    return response.status === 'completed' ? response : undefined;
  }, 'the response to complete', 4 * LEASE_MS + 15_000);
  expect(completed.output_text).to.equal(`Echo: ${INPUT}`);
  const events = await replay(client, id);
  const types = events.map((event) => event.type);
  expect(types.filter((type) => type === 'response.created')).to.have.length(1);
  expect(types.filter((type) => type === 'response.in_progress')).to.have.length(1);
  expect(types.at(-1)).to.equal('response.completed');
  const text = events.flatMap((event) => (event.type === 'response.output_text.delta' ? [event.delta] : [])).join('');
  expect(text).to.equal(`Echo: ${INPUT}`);
  const sequences = events.map((event) => event.sequence_number);
  expect(sequences, 'increasing sequence numbers').to.deep.equal([...sequences].sort((a, b) => a - b));
  if (databaseUrl) {
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      const { rows } = await db.query<{ role: string }>('select role from conversations where session_id = (select session_id from responses where id = $1) order by id', [id]);
      expect(rows.map((row) => row.role)).to.deep.equal(['user', 'assistant']);
    } finally {
      await db.end();
    }
  }
  const next = await client.responses.create({ model: 'svc-agent', input: 'Are you there?', previous_response_id: id });
  expect(next).to.include({ status: 'completed', output_text: 'Echo: Are you there?' });
}

/** What a client sees of a background response whose process died: failed, with a last response.failed event, and the session goes on. */
async function expectFailedAndContinued(client: OpenAI, id: string): Promise<void> {
  const failed = await waitFor(async () => {
    const response = await client.responses.retrieve(id);
    return response.status === 'failed' ? response : undefined;
  }, 'the response to fail', 4 * LEASE_MS + 5_000);
  expect(failed.error).to.deep.include({ code: 'server_error' });
  expect(failed.error!.message).to.match(/stopped/);
  const events = await replay(client, id);
  expect(events[0]!.type).to.equal('response.created');
  expect(events.at(-1)).to.deep.include({ type: 'response.failed' });
  const next = await client.responses.create({ model: 'svc-agent', input: 'Are you there?', previous_response_id: id });
  expect(next).to.include({ status: 'completed', output_text: 'Echo: Are you there?' });
}

const serverUrl = process.env.TEST_DATABASE_URL;
const onServer = serverUrl ? describe : describe.skip;

onServer(`a worker killed under a background response${serverUrl ? '' : ' (skipped: needs TEST_DATABASE_URL)'}`, function () {
  this.timeout(90_000);
  let database: ScratchDatabase;
  let llm: FakeLlm;
  let service: RunningChild;
  let client: OpenAI;

  before(async () => {
    database = await createScratchDatabase(serverUrl!);
    llm = await startFakeLlm();
    const port = await freePort();
    service = await startService(port, llm, { APP_WORKERS: '2', DB_URL: database.url });
    await waitFor(() => clusterWorkersOf(service.process.pid!).length === 2, 'two workers', 30_000);
    // As a user's client would, it tries again when a connection the dead worker held breaks.
    client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'placeholder', maxRetries: 2 });
  });
  after(async () => {
    await service?.stop(2_000);
    await llm?.close();
    await database?.drop();
  });

  it('has another worker take it over and complete it, its stream that of one response, its session usable', async () => {
    hangOnce(llm);
    const created = await client.responses.create({ model: 'svc-agent', input: INPUT, background: true });
    await llm.waitForRequest(() => true, 10_000);
    const runner = await waitFor(async () => {
      const db = new pg.Client({ connectionString: database.url });
      await db.connect();
      try {
        const { rows } = await db.query<{ runner: string }>('select runner from background_runs where response_id = $1', [created.id]);
        return rows[0]?.runner;
      } finally {
        await db.end();
      }
    }, 'the run row');
    // The runner is named host:pid:random.
    const pid = Number(runner.split(':').at(-2));
    expect(clusterWorkersOf(service.process.pid!)).to.include(pid);
    process.kill(pid, 'SIGKILL');
    await waitFor(() => !isProcessAlive(pid), 'the worker to die');
    await expectCompletedAndContinued(client, created.id, database.url);
  });
});

describe('the embedded service killed or stopped under a background response', function () {
  this.timeout(90_000);
  let folder: string;
  let llm: FakeLlm;
  let service: RunningChild | undefined;

  before(async () => {
    folder = mkdtempSync(join(tmpdir(), 'svc-background-kill-'));
    llm = await startFakeLlm();
  });
  after(async () => {
    await service?.stop(2_000);
    await llm?.close();
    rmSync(folder, { recursive: true, force: true });
  });

  /** Kills the service where it runs a background response, and starts it again. */
  async function killAndRestart(port: number, env: NodeJS.ProcessEnv): Promise<void> {
    await llm.waitForRequest(() => true, 10_000);
    const pid = service!.process.pid!;
    process.kill(pid, 'SIGKILL');
    await waitFor(() => !isProcessAlive(pid), 'the service to die');
    service = await startService(port, llm, env);
  }

  it('takes the response over at the next start and completes it, and its session goes on', async () => {
    const port = await freePort();
    const env = { DB_URL: '', DATA_DIR: join(folder, 'data') };
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    service = await startService(port, llm, env);
    hangOnce(llm);
    const created = await client.responses.create({ model: 'svc-agent', input: INPUT, background: true });
    await killAndRestart(port, env);
    await expectCompletedAndContinued(client, created.id);
  });

  it('fails the response with its reason once it was taken over sessions.max_turn_attempts times, and its session goes on', async () => {
    await service?.stop(2_000);
    const port = await freePort();
    const env = { DB_URL: '', DATA_DIR: join(folder, 'data'), SESSIONS_MAX_TURN_ATTEMPTS: '1' };
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    service = await startService(port, llm, env);
    llm.reset();
    const created = await client.responses.create({ model: 'svc-agent', input: HANGING_INPUT, background: true });
    // Taken over once at the next start, where it hangs again; given up at the start after.
    await killAndRestart(port, env);
    llm.reset();
    await killAndRestart(port, env);
    const failed = await client.responses.retrieve(created.id);
    expect(failed.status).to.equal('failed');
    expect(failed.error!.message).to.equal('the service process running this response stopped before it finished, and so did the one that took it over (sessions.max_turn_attempts)');
    await expectFailedAndContinued(client, created.id);
  });

  it('stopped gracefully, gives a running response the shutdown time to end, then stores it failed', async () => {
    await service?.stop(2_000);
    const port = await freePort();
    const env = { DB_URL: '', DATA_DIR: join(folder, 'data'), APP_SHUTDOWN_TIMEOUT_MS: '300' };
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    service = await startService(port, llm, env);
    llm.reset();
    const created = await client.responses.create({ model: 'svc-agent', input: HANGING_INPUT, background: true });
    await llm.waitForRequest(() => true, 10_000);
    await service.stop(10_000);
    service = await startService(port, llm, env);
    const stopped = await client.responses.retrieve(created.id);
    expect(stopped.status).to.equal('failed');
    expect(stopped.error!.message).to.equal('the service stopped before this response finished');
    expect((await replay(client, created.id)).at(-1)).to.deep.include({ type: 'response.failed' });
  });
});
