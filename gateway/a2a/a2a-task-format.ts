import type { Artifact, Message, Part, StreamResponse, Task, TaskState, TaskStatus } from '@a2a-js/sdk';
import type { ResponseRecord } from '../../runtime/ports.js';
import type { ApprovalWords } from '../../runtime/tools/approval-words.js';
import { ROUND_SEPARATOR } from '../../runtime/sessions/turn-types.js';
import { approvalQuestion, type ApprovalRequest } from '../../runtime/tools/tool-approvals.js';
import type { A2ASdk } from './a2a-sdk.js';

/** The id of the one artifact a task has: the agent's answer, its texts joined. */
export const ANSWER_ARTIFACT_ID = 'answer';


/** A response's body fields a task is read from. */
type Body = { status?: unknown; output?: unknown; error?: unknown };
type OutputItem = { type?: unknown; id?: unknown; content?: unknown; server_label?: unknown; name?: unknown; arguments?: unknown };

/** A task, its state and its status as a stored background response holds them: the functions that need the SDK's enums. */
export type TaskFormat = ReturnType<typeof createTaskFormat>;

/** The task format over the SDK's `Role` and `TaskState`. */
export function createTaskFormat({ Role, TaskState }: Pick<A2ASdk, 'Role' | 'TaskState'>) {
  /**
   * A task's state from its background response's status: queued is submitted, in_progress
   * working, cancelled canceled, incomplete completed; a completed response that holds tool calls for the user's
   * approval is input-required (its next message in the context answers them).
   */
  function taskStateOf(body: Body): TaskState {
    switch (body.status) {
      case 'queued':
        return TaskState.TASK_STATE_SUBMITTED;
      case 'in_progress':
        return TaskState.TASK_STATE_WORKING;
      case 'completed':
        return approvalItemsOf(body).length > 0 ? TaskState.TASK_STATE_INPUT_REQUIRED : TaskState.TASK_STATE_COMPLETED;
      case 'incomplete':
        // Ended at a length limit (a reply cut short, a turn's token budget) with what it had: A2A has no state nearer.
        return TaskState.TASK_STATE_COMPLETED;
      case 'cancelled':
        return TaskState.TASK_STATE_CANCELED;
      default:
        // `failed`.
        return TaskState.TASK_STATE_FAILED;
    }
  }

  /** True for the states in which a task takes no more events: terminal, or waiting on its client. */
  function isSettledState(state: TaskState): boolean {
    return state !== TaskState.TASK_STATE_SUBMITTED && state !== TaskState.TASK_STATE_WORKING;
  }

  /** True for the states a task never leaves. */
  function isTerminalState(state: TaskState): boolean {
    return isSettledState(state) && state !== TaskState.TASK_STATE_INPUT_REQUIRED;
  }

  /** The task a stored background response is: its status, its answer as an artifact, the user's message as its history. */
  function taskOf(record: ResponseRecord, words: ApprovalWords, historyLength?: number): Task {
    const body = record.body as Body;
    const state = taskStateOf(body);
    const answer = answerTextOf(body);
    // While the turn runs its body holds the text so far, which a stream shows as it comes.
    const artifacts = isSettledState(state) && answer !== '' ? [answerArtifact(answer)] : [];
    const messages = userMessagesOf(record);
    // The newest `historyLength` messages (none for 0); all when the client sets no limit.
    const history = historyLength === undefined ? messages : messages.slice(Math.max(0, messages.length - historyLength));
    return { id: record.id, contextId: record.sessionId, status: statusOf(record, words), artifacts, history, metadata: undefined };
  }

  /** The status of a task from its response: its state, with the question of an input-required task, or the error of a failed one, as its message. */
  function statusOf(record: ResponseRecord, words: ApprovalWords): TaskStatus {
    const body = record.body as Body;
    const state = taskStateOf(body);
    let text: string | undefined;
    if (state === TaskState.TASK_STATE_INPUT_REQUIRED) text = approvalQuestion(approvalItemsOf(body), words);
    if (state === TaskState.TASK_STATE_FAILED) text = errorTextOf(body);
    const message = text === undefined ? undefined : agentMessage(record, text);
    return { state, message, timestamp: new Date().toISOString() };
  }

  function agentMessage(record: Pick<ResponseRecord, 'id' | 'sessionId'>, text: string): Message {
    return {
      messageId: `${record.id}-status`,
      contextId: record.sessionId,
      taskId: record.id,
      role: Role.ROLE_AGENT,
      parts: [textPart(text)],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    };
  }

  /** The user's messages of a response (its input), as A2A messages. */
  function userMessagesOf(record: ResponseRecord): Message[] {
    return record.input.flatMap((item): Message[] => {
      if (item.type !== 'message' || item.role !== 'user') return [];
      const text = typeof item.content === 'string' ? item.content : contentText(item.content);
      return [{ messageId: String(item.id), contextId: record.sessionId, taskId: record.id, role: Role.ROLE_USER, parts: [textPart(text)], metadata: undefined, extensions: [], referenceTaskIds: [] }];
    });
  }

  return { taskStateOf, isSettledState, isTerminalState, taskOf, statusOf };
}

/** A status update of a task, as a stream event. */
export function statusUpdate(record: Pick<ResponseRecord, 'id' | 'sessionId'>, status: TaskStatus): StreamResponse {
  return { payload: { $case: 'statusUpdate', value: { taskId: record.id, contextId: record.sessionId, status, metadata: undefined } } };
}

/** A piece of a task's answer, as a stream event: the first piece starts the artifact, the others append to it. */
export function answerPiece(record: Pick<ResponseRecord, 'id' | 'sessionId'>, text: string, append: boolean): StreamResponse {
  return { payload: { $case: 'artifactUpdate', value: { taskId: record.id, contextId: record.sessionId, artifact: answerArtifact(text), append, lastChunk: false, metadata: undefined } } };
}

/** A text part. */
export function textPart(text: string): Part {
  return { content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' };
}

/** The texts of a message's text parts, joined by new lines; undefined when it has another kind of part. */
export function textOfParts(parts: readonly Part[]): string | undefined {
  const texts: string[] = [];
  for (const part of parts) {
    if (part.content?.$case !== 'text') return undefined;
    texts.push(part.content.value);
  }
  return texts.join('\n');
}

function answerArtifact(text: string): Artifact {
  return { artifactId: ANSWER_ARTIFACT_ID, name: 'answer', description: "The agent's answer", parts: [textPart(text)], metadata: undefined, extensions: [] };
}

/** The texts of a response's message items, joined as one answer. */
function answerTextOf(body: Body): string {
  const items = Array.isArray(body.output) ? (body.output as OutputItem[]) : [];
  return items
    .filter((item) => item.type === 'message')
    .map((item) => contentText(item.content))
    .filter((text) => text !== '')
    .join(ROUND_SEPARATOR);
}

function contentText(content: unknown): string {
  if (!Array.isArray(content)) return '';
  return (content as Array<{ text?: unknown }>).map((part) => (typeof part.text === 'string' ? part.text : '')).join('');
}

function errorTextOf(body: Body): string {
  const error = body.error as { message?: unknown } | null | undefined;
  return typeof error?.message === 'string' ? error.message : 'the task failed';
}

/** The calls a response ended holding for the user's approval, as the approval rule words its question about them. */
function approvalItemsOf(body: Body): ApprovalRequest[] {
  const items = Array.isArray(body.output) ? (body.output as OutputItem[]) : [];
  return items
    .filter((item) => item.type === 'mcp_approval_request')
    .map((item) => ({
      id: String(item.id),
      server: String(item.server_label),
      tool: String(item.name),
      call: { id: String(item.id), type: 'function' as const, function: { name: String(item.name), arguments: String(item.arguments) } },
    }));
}
