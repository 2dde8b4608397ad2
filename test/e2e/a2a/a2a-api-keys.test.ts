import { expect } from 'chai';
import { TaskState } from '@a2a-js/sdk';
import { startTestService, type TestService } from '../../support/service-harness.js';
import { a2aClient, answerOf, asTask, sendRequest, userMessage } from '../../support/a2a-client.js';

describe('the A2A server with API keys', function () {
  this.timeout(30_000);
  let harness: TestService;
  before(async () => {
    harness = await startTestService({ env: { API_KEYS: 'admin-key, alice-key:alice' } });
  });
  after(() => harness?.close());

  it('serves the agent card without a key, declaring a bearer scheme and requiring it', async () => {
    const response = await fetch(`${harness.service.url}/.well-known/agent-card.json`, { headers: { 'A2A-Version': '1.0' } });
    expect(response.status).to.equal(200);
    const card = (await response.json()) as Record<string, any>;
    expect(card.securitySchemes).to.deep.equal({ bearer: { httpAuthSecurityScheme: { description: 'An API key of the service (auth.api_keys), as a bearer token', scheme: 'Bearer' } } });
    expect(card.securityRequirements).to.deep.equal([{ schemes: { bearer: {} } }]);
  });

  it('refuses a call without a key with 401', async () => {
    const response = await fetch(`${harness.service.url}/a2a`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'A2A-Version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'resp_x' } }),
    });
    expect(response.status).to.equal(401);
  });

  it('runs the task as the key’s user, whose tasks another user cannot read', async () => {
    const alice = await a2aClient(harness.service.url, 'alice-key');
    const task = asTask(await alice.sendMessage(sendRequest(userMessage('hello, I am alice'))));
    expect(task.status!.state).to.equal(TaskState.TASK_STATE_COMPLETED);
    expect(answerOf(task)).to.equal('Echo: hello, I am alice');
    const stored = await harness.service.database.db.selectFrom('responses').select(['user_id', 'session_id']).where('id', '=', task.id).executeTakeFirstOrThrow();
    expect(stored).to.deep.equal({ user_id: 'alice', session_id: task.contextId });
    expect((await alice.getTask({ tenant: '', id: task.id })).id).to.equal(task.id);
    // The admin key acts as the default user here: alice's task does not exist for it.
    const admin = await a2aClient(harness.service.url, 'admin-key');
    const error = await admin.getTask({ tenant: '', id: task.id }).then(
      () => undefined,
      (caught: { reason?: string }) => caught,
    );
    expect(error?.reason).to.equal('TASK_NOT_FOUND');
  });

  it('does not let another user continue a user’s context', async () => {
    const alice = await a2aClient(harness.service.url, 'alice-key');
    const task = asTask(await alice.sendMessage(sendRequest(userMessage('a secret of alice'))));
    const admin = await a2aClient(harness.service.url, 'admin-key');
    const error = await admin.sendMessage(sendRequest(userMessage('what did she say? [[echo-context]]', { contextId: task.contextId }))).then(
      () => undefined,
      (caught: { reason?: string }) => caught,
    );
    expect(error?.reason).to.equal('TASK_NOT_FOUND');
    const rows = await harness.service.database.db.selectFrom('responses').select('user_id').where('session_id', '=', task.contextId).execute();
    expect(rows.map((row) => row.user_id)).to.deep.equal(['alice']);
  });
});
