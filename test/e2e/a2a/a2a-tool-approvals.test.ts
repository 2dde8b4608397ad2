import { expect } from 'chai';
import { TaskState, type StreamResponse } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { useEverythingService } from '../../support/everything-service.js';
import { a2aClient, answerOf, asTask, sendRequest, statusText, userMessage } from '../../support/a2a-client.js';

const SUM_REQUEST = 'Add them up [[tool:everything__get-sum {"a":2,"b":3}]]';
const QUESTION = 'May I run the tool get-sum of the server everything with the arguments {"a":2,"b":3}? Reply yes to run it, or no.';

describe('tool approvals over A2A (require_approval: always)', function () {
  this.timeout(60_000);
  const service = useEverythingService({ serverOptions: '    require_approval: always\n' });
  let client: Client;
  before(async () => {
    client = await a2aClient(service.harness.service.url);
  });

  it('lists the agent’s tools as skills on its card', async () => {
    const card = (await (await fetch(`${service.harness.service.url}/.well-known/agent-card.json`, { headers: { 'A2A-Version': '1.0' } })).json()) as { skills: Array<{ id: string; tags: string[] }> };
    const sum = card.skills.find((skill) => skill.id === 'tool:everything__get-sum');
    expect(sum?.tags).to.deep.equal(['tool']);
    expect(card.skills[0]!.id).to.equal('agent_reply');
  });

  it('ends the task input-required with the question as its status message, and the answer yes in its context runs the call and completes', async () => {
    const asking = asTask(await client.sendMessage(sendRequest(userMessage(SUM_REQUEST))));
    expect(asking.status!.state).to.equal(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(statusText(asking)).to.equal(QUESTION);
    expect(service.toolCalls).to.deep.equal([]);
    expect((await client.getTask({ tenant: '', id: asking.id })).status!.state).to.equal(TaskState.TASK_STATE_INPUT_REQUIRED);

    const answered = asTask(await client.sendMessage(sendRequest(userMessage('yes', { contextId: asking.contextId, taskId: asking.id }))));
    expect(answered.contextId).to.equal(asking.contextId);
    expect(answered.status!.state).to.equal(TaskState.TASK_STATE_COMPLETED);
    expect(answerOf(answered)).to.match(/^Tool result: .*\b5\b/);
    expect(service.toolCalls.map(({ tool }) => tool)).to.deep.equal(['get-sum']);
  });

  it('streams the task to input-required, with the question as its last status message', async () => {
    const events: StreamResponse[] = [];
    for await (const event of client.sendMessageStream(sendRequest(userMessage(SUM_REQUEST)))) events.push(event);
    const last = events.at(-1)!.payload;
    expect(last?.$case).to.equal('statusUpdate');
    if (last?.$case !== 'statusUpdate') return;
    expect(last.value.status!.state).to.equal(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(statusText(last.value)).to.equal(QUESTION);
    expect(service.toolCalls).to.deep.equal([]);
  });

  it('runs nothing when the answer is no, and the task completes with the agent’s reply to the refusal', async () => {
    const asking = asTask(await client.sendMessage(sendRequest(userMessage(SUM_REQUEST))));
    expect(asking.status!.state).to.equal(TaskState.TASK_STATE_INPUT_REQUIRED);
    const answered = asTask(await client.sendMessage(sendRequest(userMessage('no', { contextId: asking.contextId }))));
    expect(answered.status!.state).to.equal(TaskState.TASK_STATE_COMPLETED);
    expect(service.toolCalls).to.deep.equal([]);
  });
});
