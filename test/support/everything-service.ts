import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RuntimeEvents } from '../../runtime/observability/event-bus.js';
import { EVERYTHING_STDIO_YAML, mcpDeploymentFile } from './mcp-fixtures.js';
import { startTestService, type TestService } from './service-harness.js';

/** The service under test with server-everything as the tool server `everything`, and the tool calls it made. */
export type EverythingService = {
  harness: TestService;
  /** The `tool:call` events since the current test began. */
  toolCalls: Array<RuntimeEvents['tool:call']>;
};

/**
 * Registers the mocha hooks of a describe block whose tests share such a service: started
 * before them, closed after, its scripted LLM reset and its tool calls forgotten before each.
 * `serverOptions` are YAML lines added to the `everything` entry (e.g. `require_approval`).
 */
export function useEverythingService(options: { serverOptions?: string; env?: NodeJS.ProcessEnv } = {}): EverythingService {
  const fixture = { toolCalls: [] as EverythingService['toolCalls'] } as EverythingService;
  let folder: string | undefined;
  before(async () => {
    folder = mkdtempSync(join(tmpdir(), 'svc-everything-'));
    const servers = `${EVERYTHING_STDIO_YAML}${options.serverOptions ?? ''}`;
    fixture.harness = await startTestService({ env: { ...options.env, CONFIG_FILE: mcpDeploymentFile(folder, servers) } });
    fixture.harness.service.events.on('tool:call', (event) => fixture.toolCalls.push(event));
  });
  after(async () => {
    await fixture.harness?.close();
    if (folder) rmSync(folder, { recursive: true, force: true });
  });
  beforeEach(() => {
    fixture.harness.llm.reset();
    fixture.toolCalls.length = 0;
  });
  return fixture;
}
