import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { CallStore, NewCallRecord } from '../../runtime/ports.js';
import { createCallRepository } from '../../storage/call-repository.js';
import { migrateToLatest } from '../../storage/index.js';
import { databaseTargets, type TestDatabase } from '../support/databases.js';

function llmCall(sessionId: string, content: string): NewCallRecord {
  return {
    kind: 'llm',
    sessionId,
    userId: 'alice',
    turnId: 'turn_0123',
    state: 'agent_reply',
    startedAt: new Date('2026-11-24T10:00:00.123Z'),
    durationMs: 12.5,
    outcome: 'ok',
    error: null,
    model: 'm',
    temperature: 0.2,
    maxTokens: null,
    request: JSON.stringify({
      model: 'm',
      messages: [
        { role: 'system', content: 'You are helpful.' },
        { role: 'user', content },
      ],
      tools: [{ type: 'function', function: { name: 'everything__echo' } }],
    }),
    finishReason: 'stop',
    usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
  };
}

function failedToolCall(sessionId: string): NewCallRecord {
  return {
    kind: 'tool',
    sessionId,
    userId: 'alice',
    turnId: 'turn_0123',
    state: 'use_tool',
    startedAt: new Date('2026-11-24T10:00:01.000Z'),
    durationMs: 3,
    outcome: 'error',
    error: 'Error: boom',
    name: 'everything__echo',
    server: 'everything',
    tool: 'echo',
    arguments: '{"message":"x"}',
    result: 'Error: boom',
    approvalRequestId: null,
  };
}

for (const target of databaseTargets()) {
  describe(`createCallRepository on ${target.name}`, () => {
    let database: TestDatabase;
    let store: CallStore;

    before(async () => {
      database = await target.open();
      await migrateToLatest(database, { vector: target.hasVector, embeddingDimensions: 3 });
      store = createCallRepository(database.db);
    });
    after(() => database?.close());

    it('stores calls and gives them back as they were, in order, paged by id', async () => {
      const sessionId = randomUUID();
      const calls = [llmCall(sessionId, 'first'), failedToolCall(sessionId), llmCall(sessionId, 'second')];
      await store.append(calls);
      await store.append([llmCall(randomUUID(), 'another session')]);
      const page = await store.page(sessionId, { limit: 10 });
      expect(page.map(({ id: _id, ...call }) => call)).to.deep.equal(calls);
      expect(page[0]!.id).to.be.below(page[1]!.id);
      const rest = await store.page(sessionId, { afterId: page[0]!.id, limit: 1 });
      expect(rest.map((call) => call.kind)).to.deep.equal(['tool']);
    });

    it('keeps a sent body with an escaped NUL as sent, and stores a NUL in a tool result as U+FFFD instead of failing the write', async () => {
      const sessionId = randomUUID();
      const withNul = failedToolCall(sessionId);
      await store.append([llmCall(sessionId, 'a\u0000b'), { ...withNul, result: 'x\u0000y' } as NewCallRecord]);
      const [llm, tool] = await store.page(sessionId, { limit: 2 });
      expect(llm?.kind === 'llm' && JSON.parse(llm.request).messages[1]).to.deep.equal({ role: 'user', content: 'a\u0000b' });
      expect(tool?.kind === 'tool' && tool.result).to.equal('x\uFFFDy');
    });

    it("deletes one session's calls and counts them", async () => {
      const [gone, kept] = [randomUUID(), randomUUID()];
      await store.append([llmCall(gone, 'x'), failedToolCall(gone), llmCall(kept, 'y')]);
      expect(await store.deleteSession(gone)).to.equal(2);
      expect(await store.page(gone, { limit: 10 })).to.deep.equal([]);
      expect(await store.page(kept, { limit: 10 })).to.have.length(1);
    });
  });
}
