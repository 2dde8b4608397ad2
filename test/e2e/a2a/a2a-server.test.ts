import { expect } from 'chai';
import { TaskState, type StreamResponse } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { startTestService, type TestService } from '../../support/service-harness.js';
import { a2aClient, answerOf, asTask, sendRequest, streamedAnswer, userMessage } from '../../support/a2a-client.js';
import { waitFor } from '../../support/wait-for.js';

/** Twelve words the scripted LLM streams one by one, `paceMs` apart. */
function slowInput(paceMs: number): string {
  return `one two three four five six seven eight nine ten eleven twelve [[pace:${paceMs}]]`;
}

/** The dialogue the scripted LLM received (`[[echo-context]]`), without the system prompt, as role and content. */
function echoedDialogue(answer: string): Array<{ role: string; content: string }> {
  const messages = JSON.parse(answer) as Array<{ role: string; content: string }>;
  return messages.filter((message) => message.role !== 'system').map(({ role, content }) => ({ role, content }));
}

/** The states a stream's task and status updates went through, in order. */
function statesOf(events: readonly StreamResponse[]): TaskState[] {
  return events.flatMap((event) => {
    if (event.payload?.$case === 'task') return [event.payload.value.status!.state];
    if (event.payload?.$case === 'statusUpdate') return [event.payload.value.status!.state];
    return [];
  });
}

/** Posts a JSON-RPC body (text) to the endpoint, as a client with no SDK does. */
async function postRpc(harness: TestService, body: string, headers: Record<string, string> = {}): Promise<{ status: number; json: Record<string, any> }> {
  const response = await fetch(`${harness.service.url}/a2a`, { method: 'POST', headers: { 'content-type': 'application/json', 'A2A-Version': '1.0', ...headers }, body });
  return { status: response.status, json: (await response.json()) as Record<string, any> };
}

describe('the A2A server', function () {
  this.timeout(30_000);
  let harness: TestService;
  let client: Client;
  before(async () => {
    harness = await startTestService();
    client = await a2aClient(harness.service.url);
  });
  after(() => harness?.close());
  beforeEach(() => harness.llm.reset?.());

  describe('the agent card', () => {
    it('describes the agent, its A2A 1.0 and 0.3 JSON-RPC endpoint, streaming, its skills and text modes, and no auth when no API keys are configured', async () => {
      const response = await fetch(`${harness.service.url}/.well-known/agent-card.json`, { headers: { 'A2A-Version': '1.0' } });
      expect(response.status).to.equal(200);
      const card = (await response.json()) as Record<string, any>;
      expect(card.name).to.equal('svc-agent');
      expect(card.description).to.include('agent_reply: The agent reasons over the conversation');
      expect(card.version).to.match(/^\d+\.\d+\.\d+/);
      expect(card.supportedInterfaces).to.deep.equal([
        { url: `${harness.service.url}/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
        { url: `${harness.service.url}/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
      ]);
      expect(card.capabilities).to.include({ streaming: true, pushNotifications: false });
      expect(card.defaultInputModes).to.deep.equal(['text/plain']);
      expect(card.defaultOutputModes).to.deep.equal(['text/plain']);
      expect(card.skills.map((skill: { id: string }) => skill.id)).to.deep.equal(['agent_reply']);
      expect(card.securitySchemes ?? {}).to.deep.equal({});
      expect(card.securityRequirements ?? []).to.deep.equal([]);
    });

    it('is the v0.3 card for a client that names no protocol version, as the SDK’s compatibility layer serves it', async () => {
      const card = (await (await fetch(`${harness.service.url}/.well-known/agent-card.json`)).json()) as Record<string, any>;
      expect(card).to.include({ name: 'svc-agent', protocolVersion: '0.3', url: `${harness.service.url}/a2a`, preferredTransport: 'JSONRPC' });
    });
  });

  describe('SendMessage', () => {
    it('answers with the completed task: the agent’s answer as its artifact, the user’s message as its history, a new context', async () => {
      const task = asTask(await client.sendMessage(sendRequest(userMessage('hello there'))));
      expect(task.status!.state).to.equal(TaskState.TASK_STATE_COMPLETED);
      expect(task.id).to.match(/^resp_/);
      expect(task.contextId).to.be.a('string').and.not.equal('');
      expect(answerOf(task)).to.equal('Echo: hello there');
      expect(task.history.map((message) => message.parts[0]!.content)).to.deep.equal([{ $case: 'text', value: 'hello there' }]);
      // The task is a background response of the Responses API, in the session that is its context.
      const stored = await harness.client.responses.retrieve(task.id);
      expect(stored).to.include({ status: 'completed', background: true });
      expect(stored.output_text).to.equal('Echo: hello there');
    });

    it('continues the session of its context: the second message’s turn is given the first one and its answer', async () => {
      const first = asTask(await client.sendMessage(sendRequest(userMessage('remember the number 42'))));
      const second = asTask(await client.sendMessage(sendRequest(userMessage('what was it? [[echo-context]]', { contextId: first.contextId }))));
      expect(second.contextId).to.equal(first.contextId);
      expect(second.id).to.not.equal(first.id);
      expect(echoedDialogue(answerOf(second))).to.deep.equal([
        { role: 'user', content: 'remember the number 42' },
        { role: 'assistant', content: 'Echo: remember the number 42' },
        { role: 'user', content: 'what was it? [[echo-context]]' },
      ]);
    });

    it('starts a session named by a context id the server has not seen, and continues it', async () => {
      const contextId = `ctx-${Date.now()}`;
      const first = asTask(await client.sendMessage(sendRequest(userMessage('first', { contextId }))));
      expect(first.contextId).to.equal(contextId);
      const second = asTask(await client.sendMessage(sendRequest(userMessage('second [[echo-context]]', { contextId }))));
      expect(echoedDialogue(answerOf(second)).map((message) => message.content)).to.deep.equal(['first', 'Echo: first', 'second [[echo-context]]']);
    });

    it('answers at once with the submitted task when the client asks not to wait, and GetTask shows it complete later', async () => {
      const submitted = asTask(await client.sendMessage(sendRequest(userMessage(slowInput(20)), true)));
      expect(submitted.status!.state).to.equal(TaskState.TASK_STATE_SUBMITTED);
      const done = await waitFor(async () => {
        const task = await client.getTask({ tenant: '', id: submitted.id });
        return task.status!.state === TaskState.TASK_STATE_COMPLETED ? task : undefined;
      }, 'the task to complete');
      expect(done.contextId).to.equal(submitted.contextId);
      expect(answerOf(done)).to.equal(`Echo: ${slowInput(20)}`);
    });
  });

  describe('SendStreamingMessage', () => {
    it('streams the task, working, the answer piece by piece, and completed', async () => {
      const events: StreamResponse[] = [];
      for await (const event of client.sendMessageStream(sendRequest(userMessage(slowInput(50))))) events.push(event);
      expect(events[0]!.payload?.$case).to.equal('task');
      const taskId = events[0]!.payload?.$case === 'task' ? events[0]!.payload.value.id : '';
      expect(statesOf(events)).to.deep.equal([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]);
      const pieces = events.filter((event) => event.payload?.$case === 'artifactUpdate');
      expect(pieces.length).to.be.greaterThan(5);
      expect(streamedAnswer(events)).to.equal(`Echo: ${slowInput(50)}`);
      expect(events.at(-1)!.payload?.$case).to.equal('statusUpdate');
      const task = await client.getTask({ tenant: '', id: taskId });
      expect(answerOf(task)).to.equal(`Echo: ${slowInput(50)}`);
    });
  });

  describe('a client that goes away', () => {
    it('leaves its streamed task running: it completes with the whole answer', async () => {
      const gone = new AbortController();
      let taskId = '';
      try {
        for await (const event of client.sendMessageStream(sendRequest(userMessage(slowInput(40))), { signal: gone.signal })) {
          if (event.payload?.$case === 'task') taskId = event.payload.value.id;
          if (event.payload?.$case === 'artifactUpdate') gone.abort();
        }
      } catch (error) {
        if (!gone.signal.aborted) throw error;
      }
      expect(taskId).to.match(/^resp_/);
      const done = await waitFor(async () => {
        const task = await client.getTask({ tenant: '', id: taskId });
        return task.status!.state === TaskState.TASK_STATE_COMPLETED ? task : undefined;
      }, 'the task to complete');
      expect(answerOf(done)).to.equal(`Echo: ${slowInput(40)}`);
    });
  });

  describe('CancelTask', () => {
    it('cancels a running task: it ends canceled, as GetTask then shows it', async () => {
      const submitted = asTask(await client.sendMessage(sendRequest(userMessage('wait for it [[hang]]'), true)));
      await waitFor(async () => (await client.getTask({ tenant: '', id: submitted.id })).status!.state === TaskState.TASK_STATE_WORKING, 'the task to run');
      const canceled = await client.cancelTask({ tenant: '', id: submitted.id, metadata: undefined });
      expect(canceled.status!.state).to.equal(TaskState.TASK_STATE_CANCELED);
      expect((await client.getTask({ tenant: '', id: submitted.id })).status!.state).to.equal(TaskState.TASK_STATE_CANCELED);
    });

    it('refuses to cancel a task that has ended (TaskNotCancelable)', async () => {
      const task = asTask(await client.sendMessage(sendRequest(userMessage('quick'))));
      const error = await client.cancelTask({ tenant: '', id: task.id, metadata: undefined }).then(
        () => undefined,
        (caught: { reason?: string }) => caught,
      );
      expect(error?.reason).to.equal('TASK_NOT_CANCELABLE');
    });
  });

  describe('SubscribeToTask', () => {
    it('follows a running task from its start: the task, its answer, and its end', async () => {
      const submitted = asTask(await client.sendMessage(sendRequest(userMessage(slowInput(40)), true)));
      const events: StreamResponse[] = [];
      for await (const event of client.resubscribeTask({ tenant: '', id: submitted.id })) events.push(event);
      expect(events[0]!.payload?.$case).to.equal('task');
      expect(statesOf(events).at(-1)).to.equal(TaskState.TASK_STATE_COMPLETED);
      expect(streamedAnswer(events)).to.equal(`Echo: ${slowInput(40)}`);
    });

    it('refuses a task that has ended (UnsupportedOperation)', async () => {
      const task = asTask(await client.sendMessage(sendRequest(userMessage('quick'))));
      const error = await (async () => {
        try {
          for await (const _event of client.resubscribeTask({ tenant: '', id: task.id }));
        } catch (caught) {
          return caught as { reason?: string };
        }
      })();
      expect(error?.reason).to.equal('UNSUPPORTED_OPERATION');
    });
  });

  describe('errors', () => {
    it('answers GetTask of an unknown task with TaskNotFound', async () => {
      const error = await client.getTask({ tenant: '', id: 'resp_unknown' }).then(
        () => undefined,
        (caught: { reason?: string }) => caught,
      );
      expect(error?.reason).to.equal('TASK_NOT_FOUND');
    });

    it('answers a body that is not JSON with a JSON-RPC parse error, not an HTTP error', async () => {
      const { status, json } = await postRpc(harness, '{"jsonrpc": "2.0", ');
      expect(status).to.equal(200);
      expect(json.error.code).to.equal(-32700);
    });

    it('answers an unknown method with method not found', async () => {
      const { status, json } = await postRpc(harness, JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'DoSomething', params: {} }));
      expect(status).to.equal(200);
      expect(json).to.deep.include({ id: 7 });
      expect(json.error.code).to.equal(-32601);
    });

    it('answers a message with a part other than text with ContentTypeNotSupported, and one without text with invalid params', async () => {
      const dataPart = { messageId: 'm1', role: 'ROLE_USER', parts: [{ data: { a: 1 } }] };
      const data = await postRpc(harness, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: dataPart } }));
      expect(data.status).to.equal(200);
      expect(data.json.error.message).to.include('only text parts');
      const blank = await postRpc(harness, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'SendMessage', params: { message: { messageId: 'm2', role: 'ROLE_USER', parts: [{ text: '  ' }] } } }));
      expect(blank.status).to.equal(200);
      expect(blank.json.error.code).to.equal(-32602);
      const none = await postRpc(harness, JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'SendMessage', params: {} }));
      expect(none.status).to.equal(200);
      expect(none.json.error.code).to.equal(-32602);
    });

    it('answers a text with a NUL character with an invalid request, as every route refuses it', async () => {
      const { status, json } = await postRpc(harness, JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'SendMessage', params: { message: { messageId: 'm', role: 'ROLE_USER', parts: [{ text: 'a\u0000b' }] } } }));
      expect(status).to.equal(200);
      expect(json.error.code).to.equal(-32600);
    });
  });

  describe('A2A 0.3 clients', () => {
    it('serves message/send and tasks/get in the 0.3 shapes through the SDK’s compatibility layer', async () => {
      const send = await postRpc(
        harness,
        JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'message/send', params: { message: { kind: 'message', messageId: 'v03', role: 'user', parts: [{ kind: 'text', text: 'hi from 0.3' }] } } }),
        { 'A2A-Version': '0.3' },
      );
      expect(send.json.result).to.deep.include({ kind: 'task' });
      expect(send.json.result.status.state).to.equal('completed');
      expect(send.json.result.artifacts[0].parts[0]).to.deep.include({ kind: 'text', text: 'Echo: hi from 0.3' });
      const get = await postRpc(harness, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { id: send.json.result.id } }), { 'A2A-Version': '0.3' });
      expect(get.json.result.status.state).to.equal('completed');
    });
  });
});
