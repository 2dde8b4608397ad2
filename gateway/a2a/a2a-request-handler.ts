import type { AgentCard, Message, SendMessageRequest, StreamResponse, Task } from '@a2a-js/sdk';
import type { A2ARequestHandler, ServerCallContext } from '@a2a-js/sdk/server';
import type { ResponseBody, ResponseRecord, ResponseStore, SessionStore } from '../../runtime/ports.js';
import { storedEventsOf } from '../../runtime/responses/response-replay.js';
import { isServiceError } from '../../runtime/service-error.js';
import type { ApprovalWords } from '../../runtime/tools/approval-words.js';
import type { BackgroundResponseDeps } from '../responses/responses-background.js';
import { cancelResponse } from '../responses/responses-background.js';
import { conversationContinuation, type Continuation } from '../responses/responses-history.js';
import type { StartBackground } from '../responses/responses-routes.js';
import { checkSessionId } from '../http/text-rules.js';
import { ROUND_SEPARATOR } from '../../runtime/sessions/turn-types.js';
import type { A2ASdk } from './a2a-sdk.js';
import { answerPiece, createTaskFormat, statusUpdate, textOfParts, type TaskFormat } from './a2a-task-format.js';

/** What the A2A request handler runs on: the background responses (its tasks) and the sessions (its contexts). */
export type A2AHandlerDeps = Pick<BackgroundResponseDeps, 'supervisor' | 'background' | 'runs' | 'limiter' | 'onError'> & {
  responses: ResponseStore;
  sessions: SessionStore;
  /** Starts a background response (the Responses API's). */
  startBackground: StartBackground;
  approvalWords: ApprovalWords;
  /** The card the JSON-RPC transport checks the requested protocol version against. */
  card: () => AgentCard;
  /** The SDK: the protocol's enums and errors. */
  sdk: A2ASdk;
};

/** A sequence number after every event of a response (the column's largest): reading after it only waits for the response's end. */
const PAST_EVERY_EVENT = 2_147_483_647;

/**
 * The A2A request handler of the SDK's JSON-RPC transport, over the service's own stores: a
 * task is a background response (its id the response's id, its state the response's status),
 * a context a session. So a task runs on whether or not its client stays, is taken over when
 * its process dies, and is read, cancelled and followed from any process, as the Responses
 * API's background responses are; the SDK's in-memory task store and executor are not used.
 */
export class A2AHandler implements A2ARequestHandler {
  private readonly format: TaskFormat;
  private readonly errors: A2ASdk['errors'];

  constructor(private readonly deps: A2AHandlerDeps) {
    this.format = createTaskFormat(deps.sdk);
    this.errors = deps.sdk.errors;
  }

  /** The card the transport checks a call's `A2A-Version` against (the served card names the endpoint's URL; see `a2a-routes`). */
  getAgentCard(): Promise<AgentCard> {
    return Promise.resolve(this.deps.card());
  }

  getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    return Promise.reject(new this.errors.ExtendedAgentCardNotConfiguredError());
  }

  /** Starts a task; waits for it to settle (ended, or asking for input) unless the client asked to be answered at once. */
  async sendMessage(params: SendMessageRequest, context: ServerCallContext): Promise<Task> {
    return this.a2aErrors(async () => {
      const record = await this.start(params, context);
      if (params.configuration?.returnImmediately) return this.format.taskOf(record, this.deps.approvalWords);
      const gone = this.callerOf(context).gone;
      for await (const _event of storedEventsOf(this.deps, record.id, PAST_EVERY_EVENT, gone));
      // A client that went away is not answered; its task runs on.
      if (gone.aborted) return this.format.taskOf(record, this.deps.approvalWords);
      return this.format.taskOf(await this.own(context, record.id), this.deps.approvalWords, params.configuration?.historyLength);
    });
  }

  /** Starts a task and streams it: the task, its status changes, its answer as it is written, its last status. */
  async *sendMessageStream(params: SendMessageRequest, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const record = await this.a2aErrors(() => this.start(params, context));
    yield { payload: { $case: 'task', value: this.format.taskOf(record, this.deps.approvalWords) } };
    yield* this.follow(record, context);
  }

  /** A user's task as its response stands, from any process. */
  async getTask(params: { id: string; historyLength?: number | undefined }, context: ServerCallContext): Promise<Task> {
    return this.a2aErrors(async () => {
      let record = await this.own(context, params.id);
      // A task still running whose process stopped is taken over (or failed, past its attempts) before it is shown.
      if (!this.format.isSettledState(this.format.taskStateOf(record.body)) && (await this.deps.runs.settleLapsed()).includes(record.id)) record = await this.own(context, params.id);
      return this.format.taskOf(record, this.deps.approvalWords, params.historyLength);
    });
  }

  /** Cancels a running task, here or on the process running it, and returns it as it ended. */
  async cancelTask(params: { id: string }, context: ServerCallContext): Promise<Task> {
    return this.a2aErrors(async () => {
      const record = await this.own(context, params.id);
      if (this.format.isSettledState(this.format.taskStateOf(record.body))) throw new this.errors.TaskNotCancelableError(`task '${params.id}' has ended (${this.deps.sdk.TaskState[this.format.taskStateOf(record.body)]}): it cannot be canceled`);
      const body = await cancelResponse(this.deps, record.id, record.body);
      return this.format.taskOf({ ...record, body: body as ResponseBody }, this.deps.approvalWords);
    });
  }

  /** Follows a running task from any process: the task as it stands, then its events as they are stored, to its last status. */
  async *resubscribe(params: { id: string }, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const record = await this.a2aErrors(() => this.own(context, params.id));
    const state = this.format.taskStateOf(record.body);
    if (this.format.isTerminalState(state)) throw new this.errors.UnsupportedOperationError(`task '${params.id}' has ended (${this.deps.sdk.TaskState[state]}): there is nothing to subscribe to`);
    // Its answer so far comes again as the stored events are read from the first.
    yield { payload: { $case: 'task', value: { ...this.format.taskOf(record, this.deps.approvalWords), artifacts: [] } } };
    if (!this.format.isSettledState(state)) yield* this.follow(record, context);
  }

  createTaskPushNotificationConfig(): Promise<never> {
    return Promise.reject(new this.errors.PushNotificationNotSupportedError());
  }

  getTaskPushNotificationConfig(): Promise<never> {
    return Promise.reject(new this.errors.PushNotificationNotSupportedError());
  }

  listTaskPushNotificationConfigs(): Promise<never> {
    return Promise.reject(new this.errors.PushNotificationNotSupportedError());
  }

  deleteTaskPushNotificationConfig(): Promise<never> {
    return Promise.reject(new this.errors.PushNotificationNotSupportedError());
  }

  listTasks(): Promise<never> {
    return Promise.reject(new this.errors.UnsupportedOperationError('ListTasks is not supported: read a context as a conversation (/v1/conversations)'));
  }

  /**
   * Starts the task of a message as a background response: in the session its context names
   * (a new one when it names none, whose id is the context's), its text the user's input.
   */
  private async start(params: SendMessageRequest, context: ServerCallContext): Promise<ResponseRecord> {
    const userId = this.userIdOf(context);
    const { message } = params;
    if (!message) throw new this.errors.RequestMalformedError('message is required');
    if (message.role === this.deps.sdk.Role.ROLE_AGENT) throw new this.errors.RequestMalformedError("message.role must be 'user': the agent's messages come from this server");
    if (message.parts.length === 0) throw new this.errors.RequestMalformedError('message.parts must hold at least one part');
    const text = textOfParts(message.parts);
    if (text === undefined) throw new this.errors.ContentTypeNotSupportedError('only text parts are accepted (the agent reads and writes text/plain)');
    if (text.trim() === '') throw new this.errors.RequestMalformedError('message.parts hold no text');
    const continuation = await this.continuationOf(message, userId);
    const begun = await this.deps.startBackground({
      body: { model: 'svc-agent', input: text, background: true, store: true },
      userId,
      continuation,
      requestId: this.callerOf(context).requestId,
    });
    return { id: begun.id, userId, sessionId: begun.sessionId, previousResponseId: null, historyHash: '', body: begun.queued as ResponseBody, input: [{ id: message.messageId, type: 'message', role: 'user', content: text }], createdAt: new Date() };
  }

  /**
   * The session a message continues: its context's (or its task's, whose context it is), with
   * that session's history and memory; none for a message that names neither (a new context).
   * A context not known yet becomes the id of the new session.
   */
  private async continuationOf(message: Message, userId: string): Promise<Continuation | undefined> {
    let contextId = message.contextId;
    if (message.taskId) {
      const task = await this.deps.responses.get(message.taskId);
      if (!task || task.userId !== userId) throw new this.errors.TaskNotFoundError(`task '${message.taskId}' not found`);
      if (contextId && contextId !== task.sessionId) throw new this.errors.RequestMalformedError(`task '${message.taskId}' is not of context '${contextId}'`);
      const state = this.format.taskStateOf(task.body);
      if (this.format.isTerminalState(state)) throw new this.errors.UnsupportedOperationError(`task '${message.taskId}' has ended (${this.deps.sdk.TaskState[state]}): send the message without its taskId to start a new task in its context`);
      contextId = task.sessionId;
    }
    if (!contextId) return undefined;
    const session = await this.deps.sessions.get(checkSessionId(contextId, 'message.contextId'));
    if (!session) return { sessionHint: contextId, history: [], previousResponseId: null };
    return conversationContinuation(this.deps, userId, contextId);
  }

  /** A user's task, as its background response is stored; TaskNotFound when it is another user's or none. */
  private async own(context: ServerCallContext, id: string): Promise<ResponseRecord> {
    const record = await this.deps.responses.get(id);
    if (!record || record.userId !== this.userIdOf(context) || record.body.background !== true) throw new this.errors.TaskNotFoundError(`task '${id}' not found`);
    return record;
  }

  /**
   * A task's events from its stored response events: working once its turn starts, each piece
   * of its answer, and its last status (completed, input-required, failed or canceled), read
   * from the stored response once it ended.
   */
  private async *follow(started: Pick<ResponseRecord, 'id' | 'sessionId'>, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const gone = this.callerOf(context).gone;
    let written = false;
    // The message items begun, and the one the last piece was of.
    let round = 0;
    let pieceRound = 0;
    for await (const event of storedEventsOf(this.deps, started.id, -1, gone)) {
      if (!event) continue;
      const data = JSON.parse(event.data) as { delta?: string; item?: { type?: string } };
      if (event.type === 'response.in_progress') yield statusUpdate(started, { state: this.deps.sdk.TaskState.TASK_STATE_WORKING, message: undefined, timestamp: new Date().toISOString() });
      if (event.type === 'response.output_item.added' && data.item?.type === 'message') round++;
      if (event.type === 'response.output_text.delta' && data.delta) {
        // A later round's text is a message of its own: the answer separates it as its whole text does.
        const piece = written && round !== pieceRound ? `${ROUND_SEPARATOR}${data.delta}` : data.delta;
        pieceRound = round;
        yield answerPiece(started, piece, written);
        written = true;
      }
    }
    if (gone.aborted) return;
    const ended = await this.a2aErrors(() => this.own(context, started.id));
    yield statusUpdate(started, this.format.statusOf(ended, this.deps.approvalWords));
  }

  /** The caller the JSON-RPC route put on the call. */
  private callerOf(context: ServerCallContext): Caller {
    const user = context.user as Partial<Caller> | undefined;
    if (!user?.userName || !user.gone) throw new this.errors.A2AError('no acting user on the call');
    return user as Caller;
  }

  /** The acting user of a call. */
  private userIdOf(context: ServerCallContext): string {
    return this.callerOf(context).userName;
  }

  /**
   * Runs `work`, turning the service's own errors into A2A errors: what the client got wrong
   * (the 4xx ones, a limit included) is a malformed request naming it, a missing resource a task
   * not found; the rest are internal errors, as the SDK maps any other error.
   */
  private async a2aErrors<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (!isServiceError(error)) throw error;
      if (error.code === 'NOT_FOUND') throw new this.errors.TaskNotFoundError({ message: error.message, cause: error });
      if (error.status < 500) throw new this.errors.RequestMalformedError({ message: error.message, cause: error, metadata: { code: error.code } });
      throw new this.errors.A2AError({ message: error.message, cause: error });
    }
  }
}

/** What the JSON-RPC route puts on each call's user (see `ActingUser` in `a2a-routes`). */
type Caller = { userName: string; requestId: string | undefined; gone: AbortSignal };
