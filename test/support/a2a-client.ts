import { Role, type Message, type StreamResponse, type Task } from '@a2a-js/sdk';
import { Client, ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

/** The A2A SDK's client for the service at `url`, from its agent card, sending `key` as a bearer token when given. */
export function a2aClient(url: string, key?: string): Promise<Client> {
  const fetchImpl: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    if (key) headers.set('Authorization', `Bearer ${key}`);
    return fetch(input, { ...init, headers });
  };
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl })] });
  return new ClientFactory(options).createFromUrl(url);
}

/** A user's text message, in a context and for a task when given. */
export function userMessage(text: string, where: { contextId?: string; taskId?: string } = {}): Message {
  return {
    messageId: `m-${Math.random().toString(36).slice(2)}`,
    contextId: where.contextId ?? '',
    taskId: where.taskId ?? '',
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** The request of `SendMessage` for a message; `returnImmediately` for a call that does not wait for the task to end. */
export function sendRequest(message: Message, returnImmediately = false) {
  return {
    tenant: '',
    message,
    configuration: { acceptedOutputModes: ['text/plain'], taskPushNotificationConfig: undefined, returnImmediately },
    metadata: undefined,
  };
}

/** The text of a task's answer artifact. */
export function answerOf(task: Task): string {
  return task.artifacts.flatMap((artifact) => artifact.parts.map((part) => (part.content?.$case === 'text' ? part.content.value : ''))).join('');
}

/** The text of a status message, if any. */
export function statusText(task: Pick<Task, 'status'>): string | undefined {
  const parts = task.status?.message?.parts;
  return parts?.map((part) => (part.content?.$case === 'text' ? part.content.value : '')).join('');
}

/** The task a `SendMessage` answered (it answers tasks only). */
export function asTask(result: Task | Message): Task {
  if (!('status' in result)) throw new Error(`expected a task, got a message: ${JSON.stringify(result)}`);
  return result;
}

/** The answer a stream's artifact updates make, appended as they say. */
export function streamedAnswer(events: readonly StreamResponse[]): string {
  let text = '';
  for (const event of events) {
    if (event.payload?.$case !== 'artifactUpdate') continue;
    const piece = event.payload.value.artifact?.parts.map((part) => (part.content?.$case === 'text' ? part.content.value : '')).join('') ?? '';
    text = event.payload.value.append ? text + piece : piece;
  }
  return text;
}
