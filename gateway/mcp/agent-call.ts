import type { Response } from 'express';
import type { CallToolRequest, CallToolResult, ElicitRequestFormParams, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { Supervisor, TurnHandlers, TurnOutcome, TurnRequest } from '../../runtime/sessions/supervisor.js';
import { ROUND_SEPARATOR } from '../../runtime/sessions/turn-types.js';
import type { ApprovalWords } from '../../runtime/tools/approval-words.js';
import { approvalQuestion, type ApprovalAnswer, type ApprovalRequest } from '../../runtime/tools/tool-approvals.js';
import { admitTurn } from '../chat/chat-route.js';
import { toServiceError } from '../http/error-handler.js';
import type { UsageLimiter } from '../http/usage-limits.js';
import { AGENT_TOOL_NAME, messageOf } from './agent-tool.js';
import type { McpServerSdk } from './mcp-server-sdk.js';
import { ProgressReporter } from './progress-reporter.js';

/** What a call of the agent tool runs on. */
export type AgentCallDeps = {
  supervisor: Supervisor;
  /** Per-user limits, as on chat requests: each call is one request. */
  limiter: UsageLimiter;
  defaults: { llmModel: string; temperature: number; maxTokens: number };
  /** The words that answer approval questions: the question is taken off a reply that elicitation answers instead. */
  approvalWords: ApprovalWords;
  /** Least time between two progress notifications of a call. */
  progressIntervalMs: number;
  /** How long an approval asked through elicitation waits for the user. */
  elicitationTimeoutMs: number;
  /** Told of a failure that is the service's fault (the call answers it as a tool error). */
  onError?: (error: Error) => void;
  /** The protocol's errors and schemas. */
  sdk: McpServerSdk;
};

/** Who calls, in which conversation, over which HTTP response. */
export type AgentCallContext = {
  userId: string;
  /** The agent session the MCP session's conversation lives in. */
  agentSession: string;
  requestId?: string;
  /** The client answers form elicitations: approvals are asked that way. */
  elicits: boolean;
  /** The POST the call came in: the call is cancelled when it closes early. */
  res: Response;
};

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/**
 * Answers a `tools/call` of the agent tool: the message is one user turn of the MCP session's
 * conversation; the reply is the text result, a failed turn an `isError` result. With a
 * `progressToken` the reply streams as progress notifications. When the turn ends holding tool
 * calls for the user's approval, a client that answers elicitations is asked (one form per
 * call) and the turn goes on with the answers; otherwise, or when the user cancels the form,
 * the result is the question, which the next call answers, as in chat.
 */
export async function callAgent(deps: AgentCallDeps, context: AgentCallContext, request: CallToolRequest, extra: Extra): Promise<CallToolResult> {
  const { name } = request.params;
  const { McpError, ErrorCode } = deps.sdk;
  if (name !== AGENT_TOOL_NAME) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: '${name}'. This server has one tool, '${AGENT_TOOL_NAME}'.`);
  const parsed = messageOf(request.params.arguments);
  if ('problem' in parsed) return toolError(parsed.problem);
  let admitted: AbortSignal | undefined;
  try {
    admitted = await admitTurn(deps.limiter, context.userId, context.res);
  } catch (error) {
    return toolError(toServiceError(error).message);
  }
  if (!admitted) return toolError('The call was cancelled.');
  const signal = AbortSignal.any([admitted, extra.signal]);
  const token = request.params._meta?.progressToken;
  const progress =
    token === undefined
      ? undefined
      : new ProgressReporter((value, message) => extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: value, message } }), deps.progressIntervalMs);
  const handlers: TurnHandlers = {
    signal,
    ...(progress ? { onContent: (piece: string) => progress.add(piece) } : {}),
    // Asked through a form, the question is not part of the streamed reply.
    ...(context.elicits ? { onApprovalRequests: () => undefined } : {}),
  };
  const base: TurnRequest = {
    userId: context.userId,
    requestId: context.requestId,
    sessionHint: context.agentSession,
    messages: [],
    params: { model: deps.defaults.llmModel, temperature: deps.defaults.temperature, max_tokens: deps.defaults.maxTokens },
  };
  const said: string[] = [];
  try {
    let outcome = await deps.supervisor.runTurn({ ...base, messages: [{ role: 'user', content: parsed.message }] }, handlers);
    while (context.elicits && outcome.approvalRequests.length > 0 && !signal.aborted) {
      const answers = await askApprovals(outcome.approvalRequests, extra, deps);
      if (!answers) break;
      said.push(withoutQuestion(outcome, deps.approvalWords));
      outcome = await deps.supervisor.runTurn({ ...base, approvals: answers }, handlers);
    }
    await progress?.flush();
    const text = [...said.filter((piece) => piece !== ''), outcome.content].join(ROUND_SEPARATOR);
    return outcome.failure ? toolError(text) : { content: [{ type: 'text', text }] };
  } catch (error) {
    await progress?.flush();
    const failure = toServiceError(error);
    if (failure.status >= 500 && failure.code === 'INTERNAL') deps.onError?.(failure.cause instanceof Error ? failure.cause : failure);
    return toolError(failure.message);
  }
}

/**
 * Asks the user about each held call with a form (`approve`: yes or no). Undefined when the
 * user cancelled a form, or the client did not answer: the calls stay pending and the question
 * is the result.
 */
async function askApprovals(requests: readonly ApprovalRequest[], extra: Extra, deps: Pick<AgentCallDeps, 'sdk' | 'elicitationTimeoutMs'>): Promise<ApprovalAnswer[] | undefined> {
  const answers: ApprovalAnswer[] = [];
  for (const request of requests) {
    let result;
    try {
      result = await extra.sendRequest({ method: 'elicitation/create', params: approvalForm(request) }, deps.sdk.ElicitResultSchema, { timeout: deps.elicitationTimeoutMs });
    } catch {
      return undefined;
    }
    if (result.action === 'cancel') return undefined;
    const approve = result.action === 'accept' && result.content?.approve === true;
    answers.push({ requestId: request.id, approve, ...(result.action === 'decline' ? { reason: 'The user declined the approval form.' } : {}), param: 'elicitation' });
  }
  return answers;
}

/** The form that asks whether a held call may run. */
function approvalForm(request: ApprovalRequest): ElicitRequestFormParams {
  const args = request.call.function.arguments.trim() === '' ? '{}' : request.call.function.arguments;
  return {
    mode: 'form',
    message: `The agent wants to run the tool ${request.tool} of the server ${request.server} with the arguments ${args}. May it?`,
    requestedSchema: {
      type: 'object',
      properties: { approve: { type: 'boolean', title: `Run ${request.tool}`, description: `Run the tool ${request.tool} (server ${request.server}) with these arguments.` } },
      required: ['approve'],
    },
  };
}

/** A reply that asked for approvals, without the question (a form asked instead). */
function withoutQuestion(outcome: TurnOutcome, words: ApprovalWords): string {
  const question = approvalQuestion(outcome.approvalRequests, words);
  const { content } = outcome;
  if (content === question) return '';
  return content.endsWith(`${ROUND_SEPARATOR}${question}`) ? content.slice(0, -(question.length + ROUND_SEPARATOR.length)) : content;
}

function toolError(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}
