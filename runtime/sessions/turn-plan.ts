import type { ChatMessage, ToolCall } from '../chat-types.js';
import type { SessionRecord } from '../ports.js';
import { ServiceError } from '../service-error.js';
import type { ApprovalWords } from '../tools/approval-words.js';
import { checkApprovalAnswers, decideApprovals, notPending, type ApprovalAnswer, type ApprovalRequest } from '../tools/tool-approvals.js';
import type { ActorCache } from './actor-cache.js';
import { APPROVAL_ROLE, EMPTY_HISTORY_HASH, splitConversation, storedToolCall, textOf, toTurn, type ClientConversation, type Turn } from './conversation-history.js';
import { decidedApprovalsOf, pendingApprovalsOf, type DecidedApprovals } from './pending-approvals.js';
import type { TurnStore } from './turn-store.js';
import { LLM_FAILURE_PREFIX, type TurnPlan, type TurnRequest } from './turn-types.js';

/** What planning a turn reads from. */
export type PlanSources = { cache: ActorCache; store: TurnStore; shortTermTurns: number; approvalWords: ApprovalWords; newSessionId: () => string };

/**
 * A client conversation as the turn path sees it: split, with its resent history's hash.
 * `fresh`: its session's id was made for this turn (`FoundSession`); `forceNew`: the turn moves
 * to such a session, away from the stored history it no longer matches.
 */
export type PlannedConversation = ClientConversation & { prefixHash: string | null; forceNew?: boolean; fresh?: boolean };

/**
 * The session a request goes to; `fresh` when its id was made here for this turn: no row of it
 * exists and no other request or process can know it before the turn answers.
 */
export type FoundSession = { sessionId: string; fresh: boolean };

/**
 * A request's messages split for its turn, refused with 400 unless the turn has something to
 * answer: a user message, tool results, or answers to approval requests. Tool results at the
 * end are answered whether or not the request offers tools: an Agents SDK hand-off into an
 * agent without tools sends the hand-off call's output and `tools: []`.
 */
export function conversationOf(request: TurnRequest): ClientConversation {
  const endsInToolResults = request.messages.findLast((message) => DIALOGUE_ROLES.has(message.role))?.role === 'tool';
  const withTools = (request.clientTools?.length ?? 0) > 0 || endsInToolResults;
  const conversation = splitConversation(request.messages, { withTools });
  const last = conversation.tail.at(-1);
  // Answers to approval requests may come alone: the turn goes on from the calls' results.
  const isAnswerOnly = !last && (request.approvals?.length ?? 0) > 0;
  if (!isAnswerOnly && last?.role !== 'user' && last?.role !== 'tool') {
    throw new ServiceError('INVALID_REQUEST', 'messages must end with a user message or tool results', { param: 'messages' });
  }
  return conversation;
}

/** The roles whose order makes a dialogue: what the last of them is decides what the turn answers. */
const DIALOGUE_ROLES: ReadonlySet<string> = new Set(['user', 'assistant', 'tool']);

/**
 * How long after its start a first turn that was never answered may still be continued by a
 * retry of it: the openai SDKs time a request out after 10 minutes, then retry.
 */
const RETRIED_FIRST_TURN_MS = 15 * 60_000;

/** How many such sessions a retry compares its message with. */
const RETRIED_FIRST_TURN_CANDIDATES = 5;

/**
 * The session a request belongs to: the one it names, the one its resent history continues, the
 * one an earlier attempt of a retried first turn began (`retried`), or a new one.
 */
export async function findSession(sources: PlanSources, request: TurnRequest, conversation: PlannedConversation): Promise<FoundSession> {
  if (request.sessionHint) return { sessionId: request.sessionHint, fresh: false };
  const { prefixHash } = conversation;
  if (prefixHash !== null) {
    const known = await sources.store.findByHistoryHash(request.userId, prefixHash);
    if (known) return { sessionId: known.sessionId, fresh: false };
  } else if (request.retried) {
    const earlier = await earlierAttemptOf(sources, request.userId, conversation.tail.map(toTurn));
    if (earlier) return { sessionId: earlier, fresh: false };
  }
  return { sessionId: sources.newSessionId(), fresh: true };
}

/**
 * The session an earlier attempt of a retried first turn began: one of the user's recent
 * sessions never answered whose stored turns are this turn's (an identical tail can only be an
 * earlier attempt's commit: a first turn stores nothing else).
 */
async function earlierAttemptOf(sources: PlanSources, userId: string, turns: Turn[]): Promise<string | undefined> {
  if (turns.length === 0) return undefined;
  for (const sessionId of await sources.store.unansweredFirstTurns(userId, RETRIED_FIRST_TURN_MS, RETRIED_FIRST_TURN_CANDIDATES)) {
    if (await sources.store.isRetriedTail(sessionId, turns)) return sessionId;
  }
  return undefined;
}

/**
 * Decides what the turn stores and which dialogue it sends, after the session is held.
 * A resent history that no longer matches the stored one (an edited or regenerated turn)
 * forks: the caller moves the turn to a new session and the stored transcript is untouched.
 * A cached session reads nothing: its row and last turns are kept beside its actor.
 */
export async function planTurn(
  sources: PlanSources,
  sessionId: string,
  generation: number,
  request: TurnRequest,
  conversation: PlannedConversation,
): Promise<TurnPlan | 'fork'> {
  const { cache, store } = sources;
  // A session whose actor lives here was last written by this process: its row is known.
  const cached = cache.get(sessionId);
  // A session whose id was made for this turn has no row to read: its first write creates it.
  const { created, ...session } = conversation.fresh
    ? { ...newSessionRecord(sessionId, request.userId), created: true }
    : cached
      ? { ...cached.session, created: false }
      : await store.claim(sessionId, request.userId);
  if (session.userId !== request.userId) {
    // Another user's session is not confirmed to exist: the same answer as an unknown agent or conversation.
    throw new ServiceError('NOT_FOUND', `No session found with id '${sessionId}'.`, { param: 'session_id' });
  }
  if (session.deletedAt) {
    throw new ServiceError('GONE', `session ${sessionId} was deleted and cannot be continued`, { param: 'session_id' });
  }
  if (request.continuesAt !== undefined && session.historyHash !== request.continuesAt) {
    throw new ServiceError('SESSION_CONFLICT', `session ${sessionId} has moved on from the turn this one continues`, { param: 'session_id' });
  }
  const { prefix, tail, prefixHash } = conversation;
  const answers = request.approvals ?? [];
  const tailTurns = tail.map(toTurn);
  const isNew = session.historyHash === null || conversation.forceNew === true;
  // A brand-new conversation stores the history the client sent with it; a continued one, its new turns.
  const turns = isNew && prefixHash !== null ? [...prefix.map(toTurn), ...tailTurns] : tailTurns;
  // The same request again after a turn that ended unanswered (cancelled, a tool needed an
  // account, or its process died: then this process has no actor of the session, and a first
  // turn left no history hash): its messages are stored already, and a stored tail equal to
  // the request's can only be that. A row this request created holds nothing yet.
  const mayRetry = conversation.forceNew !== true && !created && turns.length > 0 && (hasUnansweredTurn(session.snapshot) || !cached);
  const isRetry = mayRetry && (await store.isRetriedTail(sessionId, turns));
  // Approvals an earlier attempt decided and did not carry out (its process died): this turn does.
  const decided = decidedApprovalsOf(session.snapshot);
  const resumed = decided && { decided, isRetry };
  // Explicit approval answers are kept in the transcript before the turn's messages (an earlier attempt's, once).
  const toStore = isRetry ? [] : [...(decided ? [] : answers.map(approvalTurn)), ...turns];
  // A row this request created holds no turns; otherwise they are known only when cached.
  const known = created ? [] : cached?.recent;
  const base = { session, isNew, generation, toStore, continues: isRetry, ...(conversation.fresh ? { starts: true as const } : {}) };
  if (prefixHash === null) {
    // A session this process does not hold may end with a turn whose process died before it answered.
    const mayBeAbandoned = !cached && !created && !isRetry && !decided && answers.length === 0 && request.continuesAt === undefined && conversation.forceNew !== true;
    const recent = isNew && !mayBeAbandoned ? known : (known ?? (await store.recentTurns(sessionId, sources.shortTermTurns)));
    // Resuming decided approvals, a retry's stored turns are what goes on after the calls' results, not history.
    const earlier = resumed && isRetry ? recent?.slice(0, Math.max(0, recent.length - tailTurns.length)) : recent;
    const history = isNew ? [] : dialogueOf(earlier ?? [], tail);
    const goesOn = isRetry && !isNew && !resumed ? [] : tail;
    const baseHash = session.historyHash ?? EMPTY_HISTORY_HASH;
    const abandoned = mayBeAbandoned && recent ? abandonedTurnOf(session, generation, recent, sources.shortTermTurns) : undefined;
    const plan = { ...base, recent, baseHash, hashed: tailTurns, ...(abandoned ? { abandoned } : {}) };
    return withApprovals(plan, history, goesOn, request, sources.approvalWords, resumed);
  }
  if (isNew) {
    const plan = { ...base, recent: known, baseHash: EMPTY_HISTORY_HASH, hashed: turns };
    return withApprovals(plan, withoutFailedReplies([...prefix, ...tail]), [], request, sources.approvalWords, resumed);
  }
  if (prefixHash !== session.historyHash) {
    // The fork has nothing pending: an answer there can only be to a request it does not have.
    if (answers[0]) throw notPending(answers[0]);
    return 'fork';
  }
  const plan = { ...base, recent: known, baseHash: prefixHash, hashed: tailTurns };
  return withApprovals(plan, withoutFailedReplies(prefix), tail, request, sources.approvalWords, resumed);
}

/** The row of a session whose id was just made, as its first write (`SessionStore.start`) creates it. */
function newSessionRecord(sessionId: string, userId: string): SessionRecord {
  const now = new Date();
  return { sessionId, userId, createdAt: now, lastActive: now, historyHash: null, snapshot: null, currentState: null, transitions: 0, deletedAt: null, metadata: {}, usage: {} };
}

/**
 * The plan's dialogue: `history`, then what goes on (`goesOn`). When the session waits on
 * approval requests, this turn decides them (explicit answers, else the word rule on the
 * user's message): the history's last assistant message gets the held calls, and the plan
 * carries the decisions, with what goes on after their results.
 */
function withApprovals(
  plan: Omit<TurnPlan, 'dialogue' | 'approvals'>,
  history: ChatMessage[],
  goesOn: ChatMessage[],
  request: TurnRequest,
  words: ApprovalWords,
  resumed?: { decided: DecidedApprovals; isRetry: boolean },
): TurnPlan {
  const answers = request.approvals ?? [];
  if (resumed) {
    // The earlier attempt's decisions stand; a retry may send its answers again, to the same requests.
    const requests = resumed.decided.decisions.map((decision) => decision.request);
    checkApprovalAnswers(requests, answers);
    const after = !resumed.isRetry || resumed.decided.goesOn ? goesOn : [];
    return { ...plan, dialogue: withHeldCalls(history, requests), approvals: { decisions: resumed.decided.decisions, after, resumed: true } };
  }
  const pending = pendingApprovalsOf(plan.session.snapshot);
  checkApprovalAnswers(pending, answers);
  if (pending.length === 0) return { ...plan, dialogue: [...history, ...goesOn] };
  const userText = textOf(goesOn.findLast((message) => message.role === 'user') ?? { role: 'user', content: '' });
  const { decisions, goesOn: continues } = decideApprovals(pending, answers, userText, words);
  return { ...plan, dialogue: withHeldCalls(history, pending), approvals: { decisions, after: continues ? goesOn : [] } };
}

/** The dialogue with the held calls on its last assistant message (the reply that asked for them), so their results can follow. */
function withHeldCalls(history: ChatMessage[], pending: readonly ApprovalRequest[]): ChatMessage[] {
  const calls = pending.map((request) => request.call);
  const last = history.at(-1);
  if (last?.role !== 'assistant') return [...history, { role: 'assistant', content: null, tool_calls: calls }];
  return [...history.slice(0, -1), { role: 'assistant', content: textOf(last), tool_calls: calls }];
}

/** An explicit approval answer as a stored turn: kept in the transcript, never in a context. */
function approvalTurn(answer: ApprovalAnswer): Turn {
  const record = { approval_request_id: answer.requestId, approve: answer.approve, ...(answer.reason ? { reason: answer.reason } : {}) };
  return { role: APPROVAL_ROLE, content: JSON.stringify(record) };
}

/**
 * The turn a session's stored transcript ends with that was never answered and whose process
 * died (it stored the user's message, and maybe steps, but not its end): planned to be finished
 * first, from its stored steps, so the next turn sees its whole answer. Not a turn that ended
 * unanswered in a live process (cancelled by its client, or stopped for a missing account: its
 * snapshot says so), nor one whose messages `recent` may not hold in full.
 */
export function abandonedTurnOf(session: TurnPlan['session'], generation: number, recent: Turn[], window: number): TurnPlan | undefined {
  if (hasUnansweredTurn(session.snapshot) || pendingApprovalsOf(session.snapshot).length > 0) return undefined;
  const firstUnanswered = recent.findLastIndex((turn) => turn.role !== 'user') + 1;
  const hashed = recent.slice(firstUnanswered);
  if (hashed.length === 0) return undefined;
  // Its messages must all be here: the earlier turns' replies before them, or the whole of a first turn.
  if (firstUnanswered === 0 && (session.historyHash !== null || recent.length >= window)) return undefined;
  const earlier = recent.slice(0, firstUnanswered);
  const dialogue: ChatMessage[] = [...dialogueOf(earlier, []), ...hashed.map((turn) => ({ role: 'user' as const, content: turn.content }))];
  return { session, isNew: false, generation, toStore: [], continues: true, recent, baseHash: session.historyHash ?? EMPTY_HISTORY_HASH, hashed, dialogue };
}

/** True when a stored snapshot says the session's last turn ended unanswered. */
export function hasUnansweredTurn(snapshot: unknown): boolean {
  return (snapshot as { unanswered?: unknown } | null)?.unanswered === true;
}

/**
 * The turns of a transcript that enter a context: system, user and assistant; tool activity
 * and failed replies stay out. One exception: tool results a client sends alone (naming its
 * session, without resending the history) need the calls they answer before them, or the
 * LLM is given results of calls it never made. Those calls, stored with the last turn, join
 * its assistant reply.
 */
function dialogueOf(turns: Turn[], tail: ChatMessage[]): ChatMessage[] {
  const answered = new Set(tail.flatMap((message) => (message.role === 'tool' ? [message.tool_call_id] : [])));
  const dialogue: ChatMessage[] = [];
  let calls: ToolCall[] = [];
  for (const turn of turns) {
    if (turn.role === 'tool_call') {
      const call = storedToolCall(turn.content);
      if (call && answered.has(call.id)) calls.push(call);
    } else if (turn.role === 'user' || turn.role === 'system') {
      calls = [];
      dialogue.push({ role: turn.role, content: turn.content });
    } else if (turn.role === 'assistant') {
      dialogue.push({ role: 'assistant', content: turn.content });
    }
  }
  const last = dialogue.at(-1);
  if (calls.length > 0 && last?.role === 'assistant') last.tool_calls = calls;
  return dialogue;
}

/**
 * A resent history without the replies that are this service's failure texts (streamed or
 * not, they hold the specification's prefix): a failed turn never reaches a later context.
 */
function withoutFailedReplies(dialogue: ChatMessage[]): ChatMessage[] {
  return dialogue.filter((message) => message.role !== 'assistant' || !textOf(message).includes(LLM_FAILURE_PREFIX));
}
