import { spawn, type ChildProcess } from 'node:child_process';
import { expect } from 'chai';
import pg from 'pg';
import OpenAI from 'openai';
import { Agent } from 'undici';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { freePort } from '../../support/mcp-fixtures.js';
import { killToExit } from '../../support/run-to-exit.js';
import { createServerSchema, type ServerSchema } from '../../support/server-schema.js';
import { waitFor } from '../../support/wait-for.js';

/** Every LLM call reports 50 tokens: a day budget of 100 holds two calls. */
const FIFTY = { prompt_tokens: 40, completion_tokens: 10 };

describe('token budgets across two workers (app.workers: 2, PostgreSQL)', function () {
  this.timeout(120_000);
  let llm: FakeLlm;
  let schema: ServerSchema;
  let primary: ChildProcess;
  let baseURL: string;
  let log = '';
  const agents: Agent[] = [];

  before(async function () {
    if (!process.env.TEST_DATABASE_URL) this.skip();
    llm = await startFakeLlm({ rules: [{ match: {}, reply: { content: 'fifty tokens', usage: FIFTY } }] });
    schema = await createServerSchema(process.env.TEST_DATABASE_URL!, 'budgets_workers');
    const port = await freePort();
    primary = spawn(process.execPath, ['--import', 'tsx', 'gateway/server/main.ts'], {
      env: {
        ...process.env,
        APP_WORKERS: '2',
        APP_HOST: '127.0.0.1',
        APP_PORT: String(port),
        DB_URL: schema.url,
        DB_POOL_SIZE: '3',
        LLM_BASE_URL: llm.url,
        LOG_LEVEL: 'info',
        LOG_FORMAT: 'json',
        LIMITS_REQUESTS_PER_MINUTE: '0',
        LIMITS_CONCURRENT_REQUESTS: '0',
        BUDGETS_TOKENS_PER_DAY: '100',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    primary.stdout!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    primary.stderr!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    await waitFor(() => log.includes('2 workers listening') || primary.exitCode !== null, 'the workers to listen', 90_000);
    expect(primary.exitCode, log).to.equal(null);
    baseURL = `http://127.0.0.1:${port}/v1`;
  });
  after(async () => {
    if (primary) await killToExit(primary);
    await Promise.all(agents.map((agent) => agent.close()));
    await schema?.drop();
    await llm?.close();
  });

  /**
   * One chat turn of `userId` over a connection of its own, kept open: the primary hands each new
   * connection to the worker holding the fewest, so turns one after the other go to one worker, then the other.
   */
  async function turnOf(userId: string): Promise<{ status: number; finishReason?: string; requestId: string }> {
    const agent = new Agent({ keepAliveTimeout: 60_000 });
    agents.push(agent);
    const fetchOverAgent = (url: string | URL | Request, init?: RequestInit) => fetch(url, { ...init, dispatcher: agent } as RequestInit);
    const client = new OpenAI({ baseURL, apiKey: 'placeholder', maxRetries: 0, fetch: fetchOverAgent });
    try {
      const { data, response } = await client.chat.completions
        .create({ model: 'svc-agent', messages: [{ role: 'user', content: 'Spend some tokens' }] }, { headers: { 'X-User-ID': userId } })
        .withResponse();
      return { status: response.status, finishReason: data.choices[0]!.finish_reason, requestId: response.headers.get('x-request-id') ?? '' };
    } catch (error) {
      if (!(error instanceof OpenAI.APIError)) throw error;
      return { status: error.status ?? 0, requestId: error.headers?.get('x-request-id') ?? '' };
    }
  }

  /** The worker whose request line names `requestId`. */
  function workerOf(requestId: string): string | undefined {
    for (const line of log.split('\n')) {
      if (!line.includes(requestId)) continue;
      try {
        const entry = JSON.parse(line) as { process?: string; requestId?: string };
        if (entry.requestId === requestId && entry.process) return entry.process;
      } catch {
        // A line that is not JSON (the primary's start-up output) names no request.
      }
    }
    return undefined;
  }

  /** What the database counted for `userId` today, input and output. */
  async function counted(userId: string): Promise<number> {
    const client = new pg.Client({ connectionString: schema.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ tokens: string | null }>('select sum(prompt_tokens + completion_tokens) as tokens from user_token_usage where user_id = $1', [userId]);
      return Number(rows[0]?.tokens ?? 0);
    } finally {
      await client.end();
    }
  }

  it("refuses a user at the day budget whichever worker the request reaches: each worker sees the other's tokens", async () => {
    const answered = [await turnOf('alternating-user'), await turnOf('alternating-user')];
    expect(answered.map((turn) => turn.status)).to.deep.equal([200, 200]);
    const refused = [await turnOf('alternating-user'), await turnOf('alternating-user')];
    expect(refused.map((turn) => turn.status)).to.deep.equal([429, 429]);
    await waitFor(() => [...answered, ...refused].every((turn) => workerOf(turn.requestId) !== undefined), 'the request lines');
    // The two answers came from two workers, and each worker refused once: neither counts alone.
    expect(new Set(answered.map((turn) => workerOf(turn.requestId))).size).to.equal(2);
    expect(new Set(refused.map((turn) => workerOf(turn.requestId))).size).to.equal(2);
    expect(await counted('alternating-user')).to.equal(100);
  });

  it('passes the budget by at most one call per worker when a burst of requests arrives at once', async () => {
    const burst = await Promise.all(Array.from({ length: 10 }, () => turnOf('burst-user')));
    const withAnswer = burst.filter((turn) => turn.status === 200 && turn.finishReason === 'stop');
    // Admitted ones that found the budget gone before their call end with what they have (nothing): length.
    const stopped = burst.filter((turn) => turn.status === 200 && turn.finishReason === 'length');
    const refused = burst.filter((turn) => turn.status === 429);
    expect(withAnswer.length + stopped.length + refused.length).to.equal(10);
    const tokens = await waitFor(async () => {
      const sum = await counted('burst-user');
      return sum === withAnswer.length * 50 ? sum : undefined;
    }, 'every answered call to be counted');
    expect(withAnswer.length).to.be.at.least(2);
    // 100, and at most one call of 50 past it in each of the two workers.
    expect(tokens).to.be.at.most(100 + 2 * 50);
    expect(await turnOf('burst-user')).to.include({ status: 429 });
  });
});
