import { expect } from 'chai';
import type { SessionRecord } from '../../runtime/ports.js';
import type { ActorCache } from '../../runtime/sessions/actor-cache.js';
import { EMPTY_HISTORY_HASH, foldHistoryHash, splitConversation, type Turn } from '../../runtime/sessions/conversation-history.js';
import { TurnJournal } from '../../runtime/sessions/turn-journal.js';
import { planTurn, type PlanSources } from '../../runtime/sessions/turn-plan.js';
import type { TurnStore } from '../../runtime/sessions/turn-store.js';
import type { TurnPlan, TurnRequest } from '../../runtime/sessions/turn-types.js';

const ANSWERED: Turn[] = [
  { role: 'user', content: 'Hello' },
  { role: 'assistant', content: 'Hi! How can I help?' },
];

/** A stored session at rest after `answered` (none: a session whose first turn was never answered). */
function sessionAfter(answered: Turn[], snapshot: Record<string, unknown> = {}): SessionRecord {
  return {
    sessionId: 'session-1',
    userId: 'alice',
    createdAt: new Date(0),
    lastActive: new Date(0),
    historyHash: answered.length > 0 ? foldHistoryHash(EMPTY_HISTORY_HASH, answered) : null,
    snapshot: { status: 'active', value: 'agent', context: { messages: [] }, ...snapshot },
    currentState: 'agent',
    transitions: 2,
    deletedAt: null,
    metadata: {},
    usage: {},
  };
}

/** Plan sources over one stored session whose stored turns are `stored`; `cached`: this process holds its actor. */
function sourcesOf(session: SessionRecord, stored: Turn[], cached = false): PlanSources {
  const store = {
    claim: async () => ({ ...session, created: false }),
    recentTurns: async () => stored,
    isRetriedTail: async (_sessionId: string, turns: Turn[]) => stored.length >= turns.length && stored.slice(-turns.length).every((turn, index) => turn.content === turns[index]!.content),
  } as unknown as TurnStore;
  return {
    cache: { get: () => (cached ? { session, recent: stored } : undefined) } as unknown as ActorCache,
    store,
    shortTermTurns: 20,
    approvalWords: { approve: ['yes'], deny: ['no'] },
    newSessionId: () => 'new-session',
  };
}

async function planned(sources: PlanSources, content: string, extra: Partial<TurnRequest> = {}): Promise<TurnPlan> {
  const messages = [{ role: 'user' as const, content }];
  const request: TurnRequest = { userId: 'alice', sessionHint: 'session-1', messages, params: { model: 'm', temperature: 0, max_tokens: 10 }, ...extra };
  const result = await planTurn(sources, 'session-1', 1, request, { ...splitConversation(messages), prefixHash: null });
  if (result === 'fork') throw new Error('expected a plan, not a fork');
  return result;
}

describe('planning a turn after one whose process died before it answered', () => {
  it('plans that turn first, continued from its steps: the anchor its attempt stored them under, the dialogue up to its message', async () => {
    const session = sessionAfter(ANSWERED);
    // The attempt that died planned its turn on the session as it was.
    const died = await planned(sourcesOf(session, ANSWERED), 'Book the flight');
    const plan = await planned(sourcesOf(session, [...ANSWERED, { role: 'user', content: 'Book the flight' }]), 'Thanks');
    const abandoned = plan.abandoned!;
    expect(abandoned.continues).to.equal(true);
    expect(abandoned.toStore).to.deep.equal([]);
    expect(TurnJournal.anchorOf(abandoned.baseHash, abandoned.hashed)).to.equal(TurnJournal.anchorOf(died.baseHash, died.hashed));
    expect(abandoned.dialogue).to.deep.equal([...ANSWERED, { role: 'user', content: 'Book the flight' }]);
    expect(abandoned.generation).to.equal(1);
  });

  it('plans a first turn that was never answered, from the empty history', async () => {
    const plan = await planned(sourcesOf(sessionAfter([]), [{ role: 'user', content: 'Book the flight' }]), 'Thanks');
    expect(plan.abandoned!.baseHash).to.equal(EMPTY_HISTORY_HASH);
    expect(plan.abandoned!.hashed).to.deep.equal([{ role: 'user', content: 'Book the flight' }]);
    expect(plan.abandoned!.dialogue).to.deep.equal([{ role: 'user', content: 'Book the flight' }]);
  });

  it('leaves a turn that ended unanswered in a live process (its client cancelled it): its snapshot says so', async () => {
    const plan = await planned(sourcesOf(sessionAfter(ANSWERED, { unanswered: true }), [...ANSWERED, { role: 'user', content: 'Book the flight' }]), 'Thanks');
    expect(plan.abandoned).to.equal(undefined);
  });

  it('finds none when the last turn was answered, when this process holds the session, or when the request continues a given response', async () => {
    const withMessage = [...ANSWERED, { role: 'user', content: 'Book the flight' }];
    expect((await planned(sourcesOf(sessionAfter(ANSWERED), ANSWERED), 'Thanks')).abandoned).to.equal(undefined);
    expect((await planned(sourcesOf(sessionAfter(ANSWERED), withMessage, true), 'Thanks')).abandoned).to.equal(undefined);
    const session = sessionAfter(ANSWERED);
    expect((await planned(sourcesOf(session, withMessage), 'Thanks', { continuesAt: session.historyHash! })).abandoned).to.equal(undefined);
  });

  it('is the retry, not an abandoned turn, when the request sends the same message again', async () => {
    const plan = await planned(sourcesOf(sessionAfter(ANSWERED), [...ANSWERED, { role: 'user', content: 'Book the flight' }]), 'Book the flight');
    expect(plan.continues).to.equal(true);
    expect(plan.abandoned).to.equal(undefined);
  });

  it('finds none when the stored window may not hold all of its messages', async () => {
    const users = Array.from({ length: 20 }, (_, index) => ({ role: 'user', content: `message ${index}` }));
    expect((await planned(sourcesOf(sessionAfter(ANSWERED), users), 'Thanks')).abandoned).to.equal(undefined);
  });
});
