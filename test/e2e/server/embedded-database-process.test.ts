import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import OpenAI from 'openai';
import { freePort, startChild, type RunningChild } from '../../../scripts/bench/child-process.js';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { runToExit } from '../../support/run-to-exit.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Runs `gateway/server/main.ts` to its exit; its exit code and all it printed. */
async function runServiceToExit(env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  const { code, stdout, stderr } = await runToExit(process.execPath, ['--import', 'tsx', 'gateway/server/main.ts'], { cwd: REPO_ROOT, env });
  return { code, output: stdout + stderr };
}

describe('the service on an embedded database folder (npm start)', function () {
  this.timeout(120_000);
  let folder: string;
  let llm: FakeLlm;
  let first: RunningChild;
  let env: NodeJS.ProcessEnv;
  let port: number;

  before(async () => {
    folder = mkdtempSync(join(tmpdir(), 'svc-one-process-'));
    llm = await startFakeLlm();
    port = await freePort();
    env = { ...process.env, DB_URL: '', API_KEYS: '', APP_HOST: '0.0.0.0', APP_PORT: String(port), DATA_DIR: join(folder, 'data'), LLM_BASE_URL: llm.url, LOG_LEVEL: 'info' };
    first = await startChild({ name: 'first', script: 'gateway/server/main.ts', cwd: REPO_ROOT, env, ready: { line: /svc-agent listening on (\S+)/ } });
  });
  after(async () => {
    await first?.stop(5_000);
    await llm?.close();
    rmSync(folder, { recursive: true, force: true });
  });

  it('says on its start line the address it is bound to, and that local mode keeps /inspect and /metrics to this machine', () => {
    const line = first.tail().find((entry) => entry.includes('svc-agent listening on'))!;
    expect(line).to.include(`listening on 0.0.0.0:${port} (every IPv4 interface of this machine)`);
    expect(line).to.include(`OpenAI base URL http://127.0.0.1:${port}/v1`);
    expect(line).to.include('local mode (no API_KEYS): /inspect and /metrics answer clients on this machine only');
  });

  it('refuses a second process on the same data folder with a clear message, and the first goes on serving', async () => {
    const second = await runServiceToExit({ ...env, APP_PORT: String(await freePort()) });
    expect(second.code, second.output).to.equal(1);
    expect(second.output).to.match(new RegExp(`in use by another process \\(pid ${first.process.pid}\\): only one process may open it`));
    expect(second.output).to.include('set DB_URL');

    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const completion = await client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: 'still mine?' }] });
    expect(completion.choices[0]!.message.content).to.equal('Echo: still mine?');
    // Served from this machine: the local-mode inspector and metrics answer.
    expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).to.equal(200);
    expect((await fetch(`http://127.0.0.1:${port}/inspect/sessions`)).status).to.equal(200);
  });
});
