import { expect } from 'chai';
import type { ChatMessage } from '../../runtime/chat-types.js';
import type { SessionRecord } from '../../runtime/ports.js';
import { ServiceError } from '../../runtime/service-error.js';
import type { ActorCache } from '../../runtime/sessions/actor-cache.js';
import { EMPTY_HISTORY_HASH, foldHistoryHash, historyHashOf, splitConversation, type Turn } from '../../runtime/sessions/conversation-history.js';
import { withPendingApprovals } from '../../runtime/sessions/pending-approvals.js';
import { planTurn, type PlanSources } from '../../runtime/sessions/turn-plan.js';
import type { TurnStore } from '../../runtime/sessions/turn-store.js';
import type { TurnPlan, TurnRequest } from '../../runtime/sessions/turn-types.js';
import type { ApprovalAnswer, ApprovalRequest } from '../../runtime/tools/tool-approvals.js';

const QUESTION = 'May I run the tool get-sum of the server everything with the arguments {"a":2,"b":3}? Reply yes to run it, or no.';
const STORED: Turn[] = [
  { role: 'user', content: 'Add 2 and 3' },
  { role: 'tool_call', content: JSON.stringify({ id: 'call_sum', name: 'everything__get-sum', arguments: '{"a":2,"b":3}' }) },
  { role: 'assistant', content: QUESTION },
];

function held(id: string, tool: string): ApprovalRequest {
  return { id, server: 'everything', tool, call: { id: `call_${tool}`, type: 'function', function: { name: `everything__${tool}`, arguments: '{"a":2,"b":3}' } } };
}

const sum = held('mcpr_sum', 'get-sum');
const echo = held('mcpr_echo', 'echo');

/** A stored session at rest after the turn that asked for `pending`. */
function sessionWaitingOn(pending: ApprovalRequest[]): SessionRecord {
  return {
    sessionId: 'session-1',
    userId: 'alice',
    createdAt: new Date(0),
    lastActive: new Date(0),
    historyHash: foldHistoryHash(EMPTY_HISTORY_HASH, STORED),
    snapshot: withPendingApprovals({ status: 'active', value: 'ask_user', context: { messages: [] }, unanswered: false }, pending),
    currentState: 'ask_user',
    transitions: 4,
    deletedAt: null,
    metadata: {},
    usage: {},
  };
}

/** Plan sources over one stored session and its stored turns; nothing is cached. */
function sourcesOf(session: SessionRecord): PlanSources {
  const store = {
    claim: async () => ({ ...session, created: false }),
    recentTurns: async () => STORED,
    isRetriedTail: async () => false,
  } as unknown as TurnStore;
  return {
    cache: { get: () => undefined } as unknown as ActorCache,
    store,
    shortTermTurns: 20,
    approvalWords: { approve: ['yes', 'ok'], deny: ['no'] },
    newSessionId: () => 'new-session',
  };
}

async function plan(pending: ApprovalRequest[], messages: ChatMessage[], approvals?: ApprovalAnswer[]): Promise<TurnPlan | 'fork'> {
  const request: TurnRequest = { userId: 'alice', sessionHint: 'session-1', messages, params: { model: 'm', temperature: 0, max_tokens: 10 }, ...(approvals ? { approvals } : {}) };
  const conversation = splitConversation(messages);
  const prefixHash = conversation.prefix.length > 0 ? historyHashOf(conversation.prefix) : null;
  return planTurn(sourcesOf(sessionWaitingOn(pending)), 'session-1', 0, request, { ...conversation, prefixHash });
}

async function planned(pending: ApprovalRequest[], messages: ChatMessage[], approvals?: ApprovalAnswer[]): Promise<TurnPlan> {
  const result = await plan(pending, messages, approvals);
  if (result === 'fork') throw new Error('expected a plan, not a fork');
  return result;
}

const replyWithCall: ChatMessage = { role: 'assistant', content: QUESTION, tool_calls: [sum.call] };

describe('planning a turn of a session waiting on approval requests', () => {
  it('approves by the word alone: the dialogue ends with the reply given the held call, and the word goes no further', async () => {
    const result = await planned([sum], [{ role: 'user', content: 'OK' }]);
    expect(result.approvals).to.deep.equal({ decisions: [{ request: sum, approve: true }], after: [] });
    expect(result.dialogue).to.deep.equal([{ role: 'user', content: 'Add 2 and 3' }, replyWithCall]);
    // The word is stored and hashed all the same: the client's history holds it.
    expect(result.toStore).to.deep.equal([{ role: 'user', content: 'OK' }]);
    expect(result.hashed).to.deep.equal([{ role: 'user', content: 'OK' }]);
  });

  it('refuses on any other message, which then goes on after the results', async () => {
    const message: ChatMessage = { role: 'user', content: 'Rather 4 and 5' };
    const result = await planned([sum], [message]);
    expect(result.approvals).to.deep.equal({ decisions: [{ request: sum, approve: false }], after: [message] });
  });

  it('decides by explicit answers, refuses what they leave out, and stores each answer before the message', async () => {
    const message: ChatMessage = { role: 'user', content: 'go on' };
    const result = await planned([sum, echo], [message], [{ requestId: 'mcpr_echo', approve: true, reason: 'fine', param: 'input[0].approval_request_id' }]);
    expect(result.approvals).to.deep.equal({
      decisions: [
        { request: sum, approve: false },
        { request: echo, approve: true, reason: 'fine' },
      ],
      after: [message],
    });
    expect(result.toStore).to.deep.equal([
      { role: 'approval', content: '{"approval_request_id":"mcpr_echo","approve":true,"reason":"fine"}' },
      { role: 'user', content: 'go on' },
    ]);
    expect((result.dialogue.at(-1) as { tool_calls: unknown[] }).tool_calls).to.deep.equal([sum.call, echo.call]);
  });

  it('accepts answers alone, with no message: nothing goes on and only the answers are stored', async () => {
    const result = await planned([sum], [], [{ requestId: 'mcpr_sum', approve: true, param: 'input[0].approval_request_id' }]);
    expect(result.approvals?.after).to.deep.equal([]);
    expect(result.toStore.map((turn) => turn.role)).to.deep.equal(['approval']);
    expect(result.hashed).to.deep.equal([]);
  });

  it('gives the held call to the last assistant turn of a resent history', async () => {
    const result = await planned([sum], [{ role: 'user', content: 'Add 2 and 3' }, { role: 'assistant', content: QUESTION }, { role: 'user', content: 'yes' }]);
    expect(result.dialogue).to.deep.equal([{ role: 'user', content: 'Add 2 and 3' }, replyWithCall]);
    expect(result.approvals?.decisions).to.deep.equal([{ request: sum, approve: true }]);
  });

  it('refuses an answer to a request the session is not waiting on with a 400 naming it', async () => {
    const error = await plan([sum], [], [{ requestId: 'mcpr_other', approve: true, param: 'input[2].approval_request_id' }]).catch((caught: unknown) => caught);
    expect(error).to.be.instanceOf(ServiceError);
    expect(error).to.include({ status: 400, param: 'input[2].approval_request_id' });
  });

  it('refuses an answer sent with a history that forks, rather than forking', async () => {
    const edited: ChatMessage[] = [{ role: 'user', content: 'Add 2 and 4' }, { role: 'assistant', content: QUESTION }];
    expect(await plan([sum], [...edited, { role: 'user', content: 'yes' }])).to.equal('fork');
    const error = await plan([sum], edited, [{ requestId: 'mcpr_sum', approve: true, param: 'input[0].approval_request_id' }]).catch((caught: unknown) => caught);
    expect(error).to.include({ status: 400, param: 'input[0].approval_request_id' });
  });

  it('plans an ordinary turn when nothing is pending', async () => {
    const result = await planned([], [{ role: 'user', content: 'yes' }]);
    expect(result.approvals).to.equal(undefined);
    expect(result.dialogue).to.deep.equal([
      { role: 'user', content: 'Add 2 and 3' },
      { role: 'assistant', content: QUESTION },
      { role: 'user', content: 'yes' },
    ]);
  });
});
