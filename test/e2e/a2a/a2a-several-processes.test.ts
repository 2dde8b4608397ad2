import { expect } from 'chai';
import { TaskState, type StreamResponse } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { servePgliteOverSocket } from '../../support/databases.js';
import { createServerSchema } from '../../support/server-schema.js';
import { startTestService, type TestService } from '../../support/service-harness.js';
import { a2aClient, answerOf, asTask, sendRequest, streamedAnswer, userMessage } from '../../support/a2a-client.js';
import { waitFor } from '../../support/wait-for.js';

type SharedDatabase = { name: string; open(): Promise<{ url: string; close(): Promise<void> }> };

/** Two services on one database stand for two workers or two instances. */
const databases: SharedDatabase[] = [{ name: 'PGlite over pglite-socket', open: () => servePgliteOverSocket() }];
if (process.env.TEST_DATABASE_URL) {
  const baseUrl = process.env.TEST_DATABASE_URL;
  databases.push({
    name: 'the PostgreSQL server',
    open: async () => {
      const schema = await createServerSchema(baseUrl, 'a2a_processes');
      return { url: schema.url, close: schema.drop };
    },
  });
}

const SLOW = 'one two three four five six seven eight nine ten eleven twelve [[pace:40]]';

for (const shared of databases) {
  describe(`A2A tasks across two service processes on ${shared.name}`, function () {
    this.timeout(60_000);
    let llm: FakeLlm;
    let database: { url: string; close(): Promise<void> };
    let first: TestService;
    let second: TestService;
    let onFirst: Client;
    let onSecond: Client;

    before(async () => {
      llm = await startFakeLlm();
      database = await shared.open();
      const env = { DB_URL: database.url, DB_POOL_SIZE: '4', SESSIONS_LEASE_MS: '1500' };
      first = await startTestService({ llm, env });
      second = await startTestService({ llm, env });
      onFirst = await a2aClient(first.service.url);
      onSecond = await a2aClient(second.service.url);
    });
    after(async () => {
      await first?.close();
      await second?.close();
      await database?.close();
      await llm?.close();
    });
    afterEach(() => llm.reset());

    it('follows from the other process a task running on the first, to its end, and reads it there', async () => {
      const submitted = asTask(await onFirst.sendMessage(sendRequest(userMessage(SLOW), true)));
      const events: StreamResponse[] = [];
      for await (const event of onSecond.resubscribeTask({ tenant: '', id: submitted.id })) events.push(event);
      expect(streamedAnswer(events)).to.equal(`Echo: ${SLOW}`);
      const done = await onSecond.getTask({ tenant: '', id: submitted.id });
      expect(done.status!.state).to.equal(TaskState.TASK_STATE_COMPLETED);
      expect(answerOf(done)).to.equal(`Echo: ${SLOW}`);
    });

    it('cancels from the other process a task running on the first', async () => {
      const submitted = asTask(await onFirst.sendMessage(sendRequest(userMessage('wait [[hang]]'), true)));
      await waitFor(async () => (await onSecond.getTask({ tenant: '', id: submitted.id })).status!.state === TaskState.TASK_STATE_WORKING, 'the task to run');
      const canceled = await onSecond.cancelTask({ tenant: '', id: submitted.id, metadata: undefined });
      expect(canceled.status!.state).to.equal(TaskState.TASK_STATE_CANCELED);
      expect((await onFirst.getTask({ tenant: '', id: submitted.id })).status!.state).to.equal(TaskState.TASK_STATE_CANCELED);
    });

    it('continues a context on the other process', async () => {
      const started = asTask(await onFirst.sendMessage(sendRequest(userMessage('my name is Ada'))));
      const next = asTask(await onSecond.sendMessage(sendRequest(userMessage('and my name? [[echo-context]]', { contextId: started.contextId }))));
      const dialogue = (JSON.parse(answerOf(next)) as Array<{ role: string; content: string }>).filter((message) => message.role !== 'system').map((message) => message.content);
      expect(dialogue).to.deep.equal(['my name is Ada', 'Echo: my name is Ada', 'and my name? [[echo-context]]']);
    });
  });
}
