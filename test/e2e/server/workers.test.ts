import { spawn, type ChildProcess } from 'node:child_process';
import { expect } from 'chai';
import OpenAI from 'openai';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { freePort } from '../../support/mcp-fixtures.js';
import { createServerSchema, type ServerSchema } from '../../support/server-schema.js';
import { clusterWorkersOf } from '../../support/cluster-workers.js';
import { killToExit } from '../../support/run-to-exit.js';
import { isProcessAlive, waitFor } from '../../support/wait-for.js';

function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

describe('several workers (app.workers)', function () {
  this.timeout(120_000);

  it('refuses more than one worker on the embedded database, naming the setting', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'gateway/server/main.ts'], {
      env: { ...process.env, APP_WORKERS: '2', DB_URL: '', DATA_DIR: 'memory://', APP_PORT: String(await freePort()) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const { code } = await exitOf(child);
    expect(code).to.equal(78);
    expect(stderr).to.match(/app\.workers.*database\.url \(DB_URL\)/);
  });

  describe('on the PostgreSQL server', function () {
    let llm: FakeLlm;
    let schema: ServerSchema;
    let primary: ChildProcess;
    let client: OpenAI;
    let port: number;
    let log = '';

    before(async function () {
      if (!process.env.TEST_DATABASE_URL) this.skip();
      llm = await startFakeLlm();
      schema = await createServerSchema(process.env.TEST_DATABASE_URL!, 'workers');
      port = await freePort();
      primary = spawn(process.execPath, ['--import', 'tsx', 'gateway/server/main.ts'], {
        env: {
          ...process.env,
          APP_WORKERS: '3',
          APP_HOST: '127.0.0.1',
          APP_PORT: String(port),
          DB_URL: schema.url,
          DB_POOL_SIZE: '3',
          LLM_BASE_URL: llm.url,
          LOG_LEVEL: 'info',
          SESSIONS_LEASE_MS: '2000',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      primary.stdout!.on('data', (chunk: Buffer) => (log += chunk.toString()));
      primary.stderr!.on('data', (chunk: Buffer) => (log += chunk.toString()));
      await waitFor(() => log.includes('3 workers listening') || primary.exitCode !== null, 'the workers to listen', 90_000);
      expect(primary.exitCode, log).to.equal(null);
      client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    });
    after(async () => {
      if (primary) await killToExit(primary);
      await schema?.drop();
      await llm?.close();
    });

    it('serves one conversation across the workers in order', async () => {
      const history: OpenAI.ChatCompletionMessageParam[] = [];
      for (let turn = 1; turn <= 6; turn += 1) {
        history.push({ role: 'user', content: `turn ${turn}` });
        const reply = await client.chat.completions.create({ model: 'svc-agent', messages: history });
        history.push({ role: 'assistant', content: reply.choices[0]!.message.content });
      }
      expect(history.at(-1)).to.deep.equal({ role: 'assistant', content: 'Echo: turn 6' });
    });

    it('replaces a worker killed with SIGKILL and keeps answering', async () => {
      const before = clusterWorkersOf(primary.pid!);
      expect(before).to.have.length(3);
      process.kill(before[0]!, 'SIGKILL');
      await waitFor(() => /worker \d \(pid \d+\) listening/.test(log), 'a new worker listening', 60_000);
      expect(log).to.match(/exited with signal SIGKILL: starting a new one/);
      expect(clusterWorkersOf(primary.pid!)).to.have.length(3).and.not.include(before[0]);
      for (let index = 0; index < 6; index += 1) {
        const reply = await client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: `after ${index}` }] });
        expect(reply.choices[0]!.message.content).to.equal(`Echo: after ${index}`);
      }
    });

    it('on SIGTERM lets a stream finish, then every worker and the primary exit with 0', async () => {
      llm.setBehaviour({ pieceDelayMs: 80 });
      const stream = await client.chat.completions.create({
        model: 'svc-agent',
        stream: true,
        messages: [{ role: 'user', content: 'one two three four five six' }],
      });
      await llm.waitForRequest((request) => JSON.stringify(request.body.messages).includes('one two three'));
      const workers = clusterWorkersOf(primary.pid!);
      primary.kill('SIGTERM');
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      expect(text).to.equal('Echo: one two three four five six');
      const { code } = await exitOf(primary);
      expect(code, log).to.equal(0);
      for (const pid of workers) expect(isProcessAlive(pid), `worker ${pid} still runs`).to.equal(false);
    });
  });
});
