import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { storedTranscript } from '../../fault/transcript.js';
import { mcpDeploymentFile, writerServer } from '../../support/mcp-fixtures.js';
import { serviceStorageTargets } from '../../support/service-storage.js';
import { startTestService, type TestService } from '../../support/service-harness.js';
import { waitFor } from '../../support/wait-for.js';

const targets = serviceStorageTargets();

for (const target of targets) {
  describe(`the steps of a turn stored as they complete (${target.name})`, function () {
    this.timeout(60_000);
    let folder: string;
    let harness: TestService;
    let cleanup: () => Promise<void>;
    const writes = () => join(folder, 'once.writes');
    const written = () => (existsSync(writes()) ? readFileSync(writes(), 'utf8').split('\n').filter(Boolean) : []);

    before(async () => {
      folder = mkdtempSync(join(tmpdir(), 'svc-steps-'));
      const prepared = await target.prepare();
      cleanup = prepared.cleanup;
      harness = await startTestService({ env: { ...prepared.env, CONFIG_FILE: mcpDeploymentFile(folder, writerServer('once', writes(), { idempotent: false })) } });
    });
    after(async () => {
      await harness?.close();
      await cleanup?.();
      rmSync(folder, { recursive: true, force: true });
    });
    beforeEach(() => harness.llm.reset());

    /** The session's stored steps, by name. */
    async function stepsOf(sessionId: string): Promise<string[]> {
      const rows = await harness.service.database.db.selectFrom('turn_steps').select('step').where('session_id', '=', sessionId).orderBy('step').execute();
      return rows.map((row) => row.step);
    }

    function chat(sessionId: string, content: string, signal?: AbortSignal) {
      return harness.client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content }] }, { headers: { 'X-Session-ID': sessionId }, signal });
    }

    /** Rounds of the LLM this test: each request's last message's role. */
    const rounds = () => harness.llm.requests.filter((request) => request.kind === 'chat').map((request) => request.body.messages!.at(-1)!.role);

    it('stores the tool round before its call runs and the result as it comes, and drops them once the turn is answered', async () => {
      const sessionId = randomUUID();
      harness.llm.script(
        { match: { hasToolResults: false }, reply: { toolCalls: [{ name: 'once__slow-write', arguments: { ms: 0 } }] } },
        { match: { hasToolResults: true }, reply: { content: 'saved', delayMs: 1_000 } },
      );
      const answer = chat(sessionId, 'save it');
      await harness.llm.waitForRequest((request) => request.body.messages!.at(-1)!.role === 'tool');
      // The round, its call's result, and with the first of them what finishing the turn without its client needs.
      const steps = await waitFor(async () => ((await stepsOf(sessionId)).length === 3 ? stepsOf(sessionId) : undefined), 'the steps stored');
      expect(steps[0]).to.match(/^result:call_/);
      expect(steps.slice(1)).to.deep.equal(['round:0', 'settings']);
      expect((await answer).choices[0]!.message.content).to.equal('saved');
      await harness.service.writer.flush();
      expect(await stepsOf(sessionId)).to.deep.equal([]);
    });

    it('stores no step of a turn that calls no tool', async () => {
      const sessionId = randomUUID();
      harness.llm.script({ reply: { content: 'hello there', delayMs: 500 } });
      const answer = chat(sessionId, 'hi');
      // Once the LLM's answer is sent, the round is over: a step of it would be stored now, before the turn ends.
      const round = await harness.llm.waitForRequest();
      await waitFor(() => round.finished, 'the answer to be sent');
      expect(await stepsOf(sessionId)).to.deep.equal([]);
      expect((await answer).choices[0]!.message.content).to.equal('hello there');
    });

    it('keeps the steps of a turn its client left, and the request sent again reuses the round and the result instead of running them again', async () => {
      const sessionId = randomUUID();
      harness.llm.script(
        { match: { hasToolResults: false }, reply: { toolCalls: [{ name: 'once__slow-write', arguments: { ms: 0 } }] } },
        { match: { hasToolResults: true }, reply: { hang: true }, times: 1 },
        { match: { hasToolResults: true }, reply: { content: 'saved' } },
      );
      const before = written().length;
      const controller = new AbortController();
      const left = chat(sessionId, 'save it', controller.signal).catch(() => 'left');
      await harness.llm.waitForRequest((request) => request.body.messages!.at(-1)!.role === 'tool');
      controller.abort();
      expect(await left).to.equal('left');
      await harness.llm.waitForAbort();
      await harness.service.writer.flush();
      expect(await stepsOf(sessionId)).to.have.length(3);

      const again = await chat(sessionId, 'save it');
      expect(again.choices[0]!.message.content).to.equal('saved');
      expect(written().length - before, 'the tool ran').to.equal(1);
      expect(rounds(), 'the LLM rounds asked').to.deep.equal(['user', 'tool', 'tool']);
      await harness.service.writer.flush();
      const transcript = await storedTranscript(harness.service.database, sessionId);
      expect(transcript.filter((row) => row.startsWith('tool: ')), 'the result stored').to.have.length(1);
      expect(transcript.filter((row) => row === 'user: save it'), 'the message stored').to.have.length(1);
      expect(await stepsOf(sessionId)).to.deep.equal([]);
    });
  });
}
