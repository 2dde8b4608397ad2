import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, type RunningChild } from '../../scripts/bench/child-process.js';
import { createScratchDatabase, type ScratchDatabase } from '../../scripts/bench/scratch-database.js';
import { startFakeLlm, type FakeLlm } from '../../scripts/fake-llm-server.js';
import { mcpDeploymentFile, writerServer } from '../support/mcp-fixtures.js';
import { startServiceProcess } from './service-process.js';

/** The service as a process a test kills, with tool servers whose calls leave a trace. */
export type WriterService = {
  readonly llm: FakeLlm;
  readonly port: number;
  readonly databaseUrl: string;
  /** The idempotency keys of the `slow-write` calls server `name` started, in order. */
  written(name: 'once' | 'again'): string[];
  /** Kills the service with SIGKILL and starts it again on the same port and database. */
  /** Kills the service with SIGKILL and starts it again, with `env` added. */
  killAndRestart(env?: NodeJS.ProcessEnv): Promise<void>;
};

/**
 * Installs the hooks of a suite that kills the service (`npm start`'s, as a process) on a
 * scratch PostgreSQL database behind the scripted LLM, with two tool servers whose `slow-write`
 * calls append their idempotency key to a file: `once`, whose calls may not run twice, and
 * `again`, declared idempotent (both asking for approval with `approval`). Each test gets a
 * fresh start of the service and a reset LLM; the files keep counting across tests.
 */
export function useWriterService(options: { serverUrl: string; leaseMs: number; approval: boolean }): WriterService {
  let folder: string;
  let database: ScratchDatabase;
  let llm: FakeLlm;
  let service: RunningChild | undefined;
  let port: number;
  let configFile: string;
  const writesOf = (name: string) => join(folder, `${name}.writes`);
  const start = (env: NodeJS.ProcessEnv = {}) => startServiceProcess({ port, llm, leaseMs: options.leaseMs, env: { DB_URL: database.url, CONFIG_FILE: configFile, ...env } });

  before(async () => {
    folder = mkdtempSync(join(tmpdir(), 'svc-writer-kill-'));
    database = await createScratchDatabase(options.serverUrl);
    llm = await startFakeLlm();
    port = await freePort();
    const approval = options.approval;
    configFile = mcpDeploymentFile(folder, writerServer('once', writesOf('once'), { idempotent: false, approval }) + writerServer('again', writesOf('again'), { idempotent: true, approval }));
  });
  after(async () => {
    await service?.stop(2_000);
    await llm?.close();
    await database?.drop();
    rmSync(folder, { recursive: true, force: true });
  });
  beforeEach(async () => {
    llm.reset();
    service = await start();
  });
  afterEach(async () => {
    await service?.stop(2_000);
    service = undefined;
  });

  return {
    get llm() {
      return llm;
    },
    get port() {
      return port;
    },
    get databaseUrl() {
      return database.url;
    },
    written: (name) => (existsSync(writesOf(name)) ? readFileSync(writesOf(name), 'utf8').split('\n').filter(Boolean) : []),
    async killAndRestart(env) {
      service!.process.kill('SIGKILL');
      service = await start(env);
    },
  };
}
