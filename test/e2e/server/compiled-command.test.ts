import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import OpenAI from 'openai';
import { freePort, startChild, type RunningChild } from '../../../scripts/bench/child-process.js';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { runToExit } from '../../support/run-to-exit.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** What `npm start` runs: plain node on the compiled service, built first when the sources changed. */
const COMMAND = 'scripts/svc-agent.mjs';

/** Runs the command to its exit; its exit code and all it printed. */
async function runCommand(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  const { code, stdout, stderr } = await runToExit(process.execPath, [COMMAND, ...args], { cwd: REPO_ROOT, env });
  return { code, output: stdout + stderr };
}

describe('the compiled service, as npm start runs it', function () {
  // The first run after a change of the sources compiles them (about 10 s on two cores).
  this.timeout(120_000);
  let folder: string;
  let llm: FakeLlm;
  let service: RunningChild;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    folder = mkdtempSync(join(tmpdir(), 'svc-compiled-'));
    llm = await startFakeLlm();
    env = { ...process.env, DB_URL: '', API_KEYS: '', APP_HOST: '127.0.0.1', DATA_DIR: join(folder, 'data'), LLM_BASE_URL: llm.url, LOG_LEVEL: 'info' };
    service = await startChild({
      name: 'compiled service',
      script: COMMAND,
      cwd: REPO_ROOT,
      env: { ...env, APP_PORT: String(await freePort()) },
      ready: { line: /OpenAI base URL (\S+)\/v1/ },
      readyTimeoutMs: 100_000,
    });
  });
  after(async () => {
    await service?.stop(5_000);
    await llm?.close();
    rmSync(folder, { recursive: true, force: true });
  });

  it('answers the openai client from JavaScript run by plain node, with no TypeScript loader', async () => {
    const client = new OpenAI({ baseURL: `${service.url}/v1`, apiKey: 'placeholder', maxRetries: 0 });
    const completion = await client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: 'compiled?' }] });
    expect(completion.choices[0]!.message.content).to.equal('Echo: compiled?');
    const commandLine = readFileSync(`/proc/${service.process.pid}/cmdline`, 'utf8').split('\0');
    expect(commandLine).to.deep.equal([process.execPath, COMMAND, '']);
  });

  it('names the TypeScript files and lines in the stack of a failed start (source maps)', async () => {
    const file = join(folder, 'not-a-folder');
    writeFileSync(file, '');
    const failed = await runCommand([], { ...env, DATA_DIR: file, APP_PORT: String(await freePort()) });
    expect(failed.code, failed.output).to.equal(1);
    expect(failed.output).to.include('start-up failed');
    expect(failed.output).to.match(/at async lockDataDir \(\S+\/storage\/data-dir-lock\.ts:\d+:\d+\)/);
    expect(failed.output).to.match(/\/gateway\/server\/service\.ts:\d+:\d+/);
    expect(failed.output).not.to.match(/\/dist\//);
  });

  it('prints its version and exits 78 with one line naming the key on a bad setting', async () => {
    const { version } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
    const shown = await runCommand(['--version'], env);
    expect(shown.output.trim()).to.equal(version);
    const bad = await runCommand([], { ...env, APP_PORT: 'eleven' });
    expect(bad.code).to.equal(78);
    expect(bad.output.trim().split('\n')).to.have.length(1);
    expect(bad.output).to.match(/app\.port/);
  });
});
