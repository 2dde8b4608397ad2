import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { TaskState } from '@a2a-js/sdk';
import { freePort, type RunningChild } from '../../scripts/bench/child-process.js';
import { startFakeLlm, type FakeLlm } from '../../scripts/fake-llm-server.js';
import { a2aClient, answerOf, asTask, sendRequest, userMessage } from '../support/a2a-client.js';
import { isProcessAlive, waitFor } from '../support/wait-for.js';
import { startServiceProcess } from './service-process.js';

const LEASE_MS = 1_000;
/** A turn the scripted LLM does not answer the first time it is asked, and answers after. */
const INPUT = 'Think about it';

describe('the embedded service killed under an A2A task', function () {
  this.timeout(90_000);
  let folder: string;
  let llm: FakeLlm;
  let service: RunningChild | undefined;

  before(async () => {
    folder = mkdtempSync(join(tmpdir(), 'svc-a2a-kill-'));
    llm = await startFakeLlm();
  });
  after(async () => {
    await service?.stop(2_000);
    await llm?.close();
    rmSync(folder, { recursive: true, force: true });
  });

  it('takes the task over at the next start and completes it (it is a background response), and its context goes on', async () => {
    const port = await freePort();
    const env = { DB_URL: '', DATA_DIR: join(folder, 'data') };
    const url = `http://127.0.0.1:${port}`;
    service = await startServiceProcess({ port, llm, leaseMs: LEASE_MS, env });
    llm.reset();
    llm.script({ reply: { hang: true }, times: 1 });
    const submitted = asTask(await (await a2aClient(url)).sendMessage(sendRequest(userMessage(INPUT), true)));
    await llm.waitForRequest(() => true, 10_000);
    const pid = service.process.pid!;
    process.kill(pid, 'SIGKILL');
    await waitFor(() => !isProcessAlive(pid), 'the service to die');
    service = await startServiceProcess({ port, llm, leaseMs: LEASE_MS, env });
    const client = await a2aClient(url);
    const completed = await waitFor(
      async () => {
        const task = await client.getTask({ tenant: '', id: submitted.id });
        expect(task.status!.state).to.be.oneOf([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]);
        return task.status!.state === TaskState.TASK_STATE_COMPLETED ? task : undefined;
      },
      'the task to complete',
      4 * LEASE_MS + 15_000,
    );
    expect(answerOf(completed)).to.equal(`Echo: ${INPUT}`);
    const next = asTask(await client.sendMessage(sendRequest(userMessage('Are you there?', { contextId: submitted.contextId }))));
    expect(next.status!.state).to.equal(TaskState.TASK_STATE_COMPLETED);
    expect(answerOf(next)).to.equal('Echo: Are you there?');
  });
});
