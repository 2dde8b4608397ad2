import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { loadConfig } from '../../../config/load-config.js';
import { startService } from '../../../gateway/server/service.js';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { EVERYTHING_ENTRY, EVERYTHING_STDIO_YAML, freePort, mcpDeploymentFile } from '../../support/mcp-fixtures.js';
import { rejection } from '../../support/rejection.js';
import { createServerSchema } from '../../support/server-schema.js';
import { testLogger } from '../../support/service-harness.js';
import { waitFor } from '../../support/wait-for.js';

/** A port held by another server: the service cannot listen on it. */
async function heldPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as { port: number }).port, server };
}

/** The pids of this process's children running server-everything (the tool server the service starts). */
function toolServerChildren(): number[] {
  try {
    const out = execFileSync('pgrep', ['-P', String(process.pid), '-f', EVERYTHING_ENTRY], { encoding: 'utf8' });
    return out.split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** The whole of what a process wrote, and how it exited. */
function run(env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'gateway/server/main.ts'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, output })));
}

describe('a start that fails', function () {
  this.timeout(60_000);
  let llm: FakeLlm;
  let held: { port: number; server: Server };
  let folder: string;

  before(async () => {
    llm = await startFakeLlm();
    held = await heldPort();
    folder = mkdtempSync(join(tmpdir(), 'svc-failed-start-'));
  });
  after(async () => {
    await llm?.close();
    held?.server.close();
    if (folder) rmSync(folder, { recursive: true, force: true });
  });

  it('closes what it opened when it cannot listen: the tool server it started has exited and the embedded database is free again', async () => {
    const dataDir = join(folder, 'db');
    const env = { APP_HOST: '127.0.0.1', LLM_BASE_URL: llm.url, DATA_DIR: dataDir, CONFIG_FILE: mcpDeploymentFile(folder, EVERYTHING_STDIO_YAML) };
    const before = toolServerChildren();
    const error = (await rejection(startService(loadConfig({ ...env, APP_PORT: String(held.port) }), testLogger()))) as NodeJS.ErrnoException;
    expect(error.code).to.equal('EADDRINUSE');
    // The tool server started while the service went on starting: stopped with the failed start.
    await waitFor(() => toolServerChildren().filter((pid) => !before.includes(pid)).length === 0, 'the tool server to exit', 10_000);
    // The data folder's lock was given back: the same folder opens again.
    const service = await startService(loadConfig({ ...env, APP_PORT: String(await freePort()) }), testLogger());
    await service.close();
  });

  it('says in one line why it cannot listen and exits 75, when the port is taken or the address is not of this machine', async () => {
    const taken = await run({ APP_HOST: '127.0.0.1', APP_PORT: String(held.port), LLM_BASE_URL: llm.url, DATA_DIR: 'memory://' });
    expect(taken.code).to.equal(75);
    const lines = taken.output.trim().split('\n');
    expect(lines, taken.output).to.have.length(1);
    expect(lines[0]).to.include(`cannot listen on 127.0.0.1:${held.port}: the address is already in use`).and.include('APP_PORT (or PORT)');
    const elsewhere = await run({ APP_HOST: '192.0.2.1', APP_PORT: String(await freePort()), LLM_BASE_URL: llm.url, DATA_DIR: 'memory://' });
    expect(elsewhere.code).to.equal(75);
    expect(elsewhere.output.trim().split('\n'), elsewhere.output).to.have.length(1);
    expect(elsewhere.output).to.include('192.0.2.1 is not an address of this machine').and.include('APP_HOST');
  });

  it('says the same with workers (the primary listens), starting no worker', async function () {
    if (!process.env.TEST_DATABASE_URL) this.skip();
    const schema = await createServerSchema(process.env.TEST_DATABASE_URL, 'failed_start');
    try {
      const taken = await run({ APP_WORKERS: '2', APP_HOST: '127.0.0.1', APP_PORT: String(held.port), LLM_BASE_URL: llm.url, DB_URL: schema.url });
      expect(taken.code).to.equal(75);
      expect(taken.output.trim().split('\n'), taken.output).to.have.length(1);
      expect(taken.output).to.include(`cannot listen on 127.0.0.1:${held.port}: the address is already in use`);
    } finally {
      await schema.drop();
    }
  });
});
