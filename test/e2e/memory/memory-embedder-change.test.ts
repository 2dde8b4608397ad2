import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { ConfigError } from '../../../config/load-config.js';
import { ensureBuilt } from '../../../scripts/build.mjs';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { startTestService, type TestService } from '../../support/service-harness.js';
import { runToExit, type ProgramRun } from '../../support/run-to-exit.js';
import { serviceStorageTargets } from '../../support/service-storage.js';

async function say(harness: TestService, text: string): Promise<void> {
  const response = await fetch(`${harness.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-User-ID': 'ada' },
    body: JSON.stringify({ messages: [{ role: 'user', content: text }] }),
  });
  expect(response.status).to.equal(200);
}

/** `svc-agent memory reembed` (`npm run memory:reembed`) as an operator runs it: its own process, the configuration in the environment. */
function reembed(env: NodeJS.ProcessEnv): Promise<ProgramRun> {
  const command = fileURLToPath(new URL('../../../scripts/svc-agent.mjs', import.meta.url));
  return runToExit(process.execPath, [command, 'memory', 'reembed'], { env: { ...process.env, ...env } });
}

for (const target of serviceStorageTargets()) {
  describe(`changing the embedder of stored long-term memories (${target.name})`, function () {
    this.timeout(120_000);
    let llm: FakeLlm;
    let storage: { env: NodeJS.ProcessEnv; cleanup(): Promise<void> };

    before(async () => {
      // The command runs the compiled sources: compiled here if they changed, not in the test's time.
      ensureBuilt();
      llm = await startFakeLlm();
      storage = await target.prepare();
    });
    after(async () => {
      await llm?.close();
      await storage?.cleanup();
    });

    it('refuses to start on memories of another embedder, and starts with the new one after npm run memory:reembed', async () => {
      const env = { ...storage.env, MEMORY_USE_LONG_TERM: 'true', LLM_BASE_URL: llm.url, LLM_EMBEDDING_MODEL: 'embedder-b' };
      const local = await startTestService({ llm, env: { ...env, MEMORY_EMBEDDINGS: 'local' } });
      await say(local, 'Please remember that my cat is called Miso.');
      await local.close();

      const refused = await startTestService({ llm, env: { ...env, MEMORY_EMBEDDINGS: 'llm' } }).then(
        async (started) => {
          await started.close();
          return null;
        },
        (error: Error) => error,
      );
      expect(refused).to.be.instanceOf(ConfigError);
      expect(refused!.message).to.contain("embedded by the local embedder, and this configuration embeds with the LLM server's model 'embedder-b'");

      llm.reset();
      const run = await reembed({ ...env, MEMORY_EMBEDDINGS: 'llm' });
      expect(run.code, run.stderr).to.equal(0);
      expect(run.stdout).to.match(/Re-embedded [1-9]\d* memories/);
      expect(llm.requests.filter((request) => request.kind === 'embeddings')).to.not.be.empty;

      const moved = await startTestService({ llm, env: { ...env, MEMORY_EMBEDDINGS: 'llm' } });
      try {
        await say(moved, "What is my cat's name?");
        const chat = [...llm.requests].reverse().find((request) => request.kind === 'chat')!;
        expect(String(chat.body.messages![1]!.content)).to.match(/^Relevant memories/).and.include('my cat is called Miso');
      } finally {
        await moved.close();
      }
    });
  });
}
