import type OpenAI from 'openai';
import { startFakeLlm, type FakeLlm } from '../../scripts/fake-llm-server.js';
import { startTestService, type TestService } from './service-harness.js';
import type { StorageTarget } from './service-storage.js';

/** The service under test on a storage target, its scripted LLM and its `openai` client. */
export type TargetService = { llm: FakeLlm; harness: TestService; client: OpenAI };

/**
 * Registers the mocha hooks of a describe block whose tests share a service on `target`: a
 * fresh store and scripted LLM started before them, all closed after, the LLM reset before each.
 */
export function useServiceOn(target: StorageTarget): TargetService {
  const fixture = {} as TargetService;
  let cleanup: (() => Promise<void>) | undefined;
  before(async () => {
    fixture.llm = await startFakeLlm();
    const storage = await target.prepare();
    cleanup = storage.cleanup;
    fixture.harness = await startTestService({ llm: fixture.llm, env: storage.env });
    fixture.client = fixture.harness.client;
  });
  after(async () => {
    await fixture.harness?.close();
    await cleanup?.();
    await fixture.llm?.close();
  });
  beforeEach(() => fixture.llm.reset());
  return fixture;
}
