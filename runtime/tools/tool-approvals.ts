import { randomUUID } from 'node:crypto';
import type { ToolCall } from '../chat-types.js';
import { ServiceError } from '../service-error.js';
import { approvalWordOf, type ApprovalWords } from './approval-words.js';
import type { ToolCallResult, ToolSource } from './tool-runner.js';

/** A call of one of the service's tools held for the user's approval (`require_approval`): it runs only once approved. */
export type ApprovalRequest = ToolSource & {
  /** `mcpr_` and 32 hexadecimal characters: the Responses API's `mcp_approval_request` item id. */
  id: string;
  call: ToolCall;
  /** The graph's agent state whose reply made the call: the decided call's result goes back to it. */
  state?: string;
};

/** An explicit answer to an approval request (the Responses API's `mcp_approval_response` item). */
export type ApprovalAnswer = {
  requestId: string;
  approve: boolean;
  reason?: string;
  /** Where the answer was in the request (e.g. `input[0].approval_request_id`), named when it is refused. */
  param: string;
};

/** What became of one approval request. */
export type ApprovalDecision = { request: ApprovalRequest; approve: boolean; reason?: string };

/** How pending requests were answered, and whether the user's message goes on into the context. */
export type ApprovalOutcome = { decisions: ApprovalDecision[]; goesOn: boolean };

/** A fresh approval request id. */
export function newApprovalRequestId(): string {
  return `mcpr_${randomUUID().replaceAll('-', '')}`;
}

/**
 * Decides the pending requests of a session. Explicit answers decide the requests they name
 * (a request they leave out is denied) and the turn's messages go on. Without any, the user's
 * message decides them all: an approving word approves, anything else denies; and a message
 * that is not a plain approving or denial word goes on as the user's next message.
 * `answers` must have been checked (`checkApprovalAnswers`).
 */
export function decideApprovals(pending: readonly ApprovalRequest[], answers: readonly ApprovalAnswer[], userText: string, words: ApprovalWords): ApprovalOutcome {
  if (answers.length > 0) {
    const byId = new Map(answers.map((answer) => [answer.requestId, answer]));
    const decisions = pending.map((request): ApprovalDecision => {
      const answer = byId.get(request.id);
      return answer ? { request, approve: answer.approve, ...(answer.reason ? { reason: answer.reason } : {}) } : { request, approve: false };
    });
    return { decisions, goesOn: true };
  }
  const word = approvalWordOf(userText, words);
  return { decisions: pending.map((request) => ({ request, approve: word === 'approve' })), goesOn: word === 'other' };
}

/** Refuses (400 naming its param) an answer to a request that is not pending in the session, or a second answer to one. */
export function checkApprovalAnswers(pending: readonly ApprovalRequest[], answers: readonly ApprovalAnswer[]): void {
  const open = new Set(pending.map((request) => request.id));
  const seen = new Set<string>();
  for (const answer of answers) {
    if (!open.has(answer.requestId)) throw notPending(answer);
    if (seen.has(answer.requestId)) {
      throw new ServiceError('INVALID_REQUEST', `approval request '${answer.requestId}' is answered twice`, { param: answer.param });
    }
    seen.add(answer.requestId);
  }
}

/** The 400 of an answer to a request that is not pending in the session the turn continues. */
export function notPending(answer: ApprovalAnswer): ServiceError {
  return new ServiceError(
    'INVALID_REQUEST',
    `approval request '${answer.requestId}' is not pending in this conversation: it was answered already, or belongs to another one`,
    { param: answer.param },
  );
}

/**
 * The question that asks for the requests, naming each tool, its server and its arguments,
 * and the words that answer it. It is the reply of the turn that held them (both APIs store it).
 */
export function approvalQuestion(requests: readonly ApprovalRequest[], words: ApprovalWords): string {
  const yes = words.approve[0] ?? 'yes';
  const no = words.deny[0] ?? 'no';
  const described = requests.map((request) => `${request.tool} of the server ${request.server} with the arguments ${argumentsText(request.call)}`);
  if (described.length === 1) return `May I run the tool ${described[0]}? Reply ${yes} to run it, or ${no}.`;
  return [`May I run these tools?`, ...described.map((text, index) => `${index + 1}. ${text}`), `Reply ${yes} to run them all, or ${no}.`].join('\n');
}

/** The result the LLM is given for a call the user did not approve: it never ran. */
export function denialResult(decision: ApprovalDecision): ToolCallResult {
  const { call, server, tool } = decision.request;
  const reason = decision.reason ? ` Their reason: ${decision.reason}` : '';
  return {
    toolCallId: call.id,
    name: call.function.name,
    content: `Error: the user did not approve this call of ${tool} (server ${server}), so it did not run.${reason}`,
    isError: true,
    source: { server, tool },
  };
}

/**
 * The result the LLM is given for a call that an earlier attempt of the turn started and whose
 * process died before its result was stored, when the tool may not run twice: it may or may not
 * have taken effect. `source` is where the tool lives, when known.
 */
export function unknownOutcomeResult(call: ToolCall, source?: ToolSource): ToolCallResult {
  const what = source ? `${source.tool} (server ${source.server})` : call.function.name;
  return {
    toolCallId: call.id,
    name: call.function.name,
    content: `Error: the outcome of this call of ${what} is unknown: the service stopped while carrying it out, so it may or may not have taken effect. Do not assume that it ran or that it did not; check before calling it again.`,
    isError: true,
    ...(source ? { source } : {}),
  };
}

function argumentsText(call: ToolCall): string {
  return call.function.arguments.trim() === '' ? '{}' : call.function.arguments;
}
