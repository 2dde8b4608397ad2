import { fileURLToPath } from 'node:url';
import { startChild, type RunningChild } from '../../scripts/bench/child-process.js';
import type { FakeLlm } from '../../scripts/fake-llm-server.js';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The service as `npm start` runs it, as a process of its own that a test can kill: on `port`
 * in front of `llm`, with no per-user limits, sessions leased for `leaseMs`, and `env` added.
 * Resolves once it logs `ready` (by default, that it listens).
 */
export function startServiceProcess(options: { port: number; llm: FakeLlm; leaseMs: number; env?: NodeJS.ProcessEnv; ready?: RegExp }): Promise<RunningChild> {
  return startChild({
    name: 'service',
    script: 'gateway/server/main.ts',
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      APP_HOST: '127.0.0.1',
      APP_PORT: String(options.port),
      LLM_BASE_URL: options.llm.url,
      LIMITS_REQUESTS_PER_MINUTE: '0',
      LIMITS_CONCURRENT_REQUESTS: '0',
      SESSIONS_LEASE_MS: String(options.leaseMs),
      LOG_LEVEL: 'info',
      ...options.env,
    },
    ready: { line: options.ready ?? /listening on/ },
  });
}
