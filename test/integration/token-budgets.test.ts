import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { NO_BUDGETS, type BudgetsConfig } from '../../config/budget-schema.js';
import type { Usage } from '../../runtime/chat-types.js';
import { EventBus, type RuntimeEvents } from '../../runtime/observability/event-bus.js';
import type { TokenUsageStore } from '../../runtime/ports.js';
import { isServiceError, type ServiceError } from '../../runtime/service-error.js';
import { DurableWriter } from '../../runtime/sessions/durable-writer.js';
import { TokenBudgets, type BudgetReached, type CallPermit } from '../../runtime/usage/token-budgets.js';
import { createTokenUsageRepository, migrateToLatest } from '../../storage/index.js';
import { databaseTargets, type TestDatabase } from '../support/databases.js';
import { rejection } from '../support/rejection.js';

/** 2026-11-28 15:00 UTC: nine hours before the day's budgets reset, three days before the month's. */
const AFTERNOON = Date.UTC(2026, 10, 28, 15);
const HOUR = 3_600_000;

function usage(prompt: number, completion: number): Usage {
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

function isPermit(leave: CallPermit | BudgetReached): leave is CallPermit {
  return 'end' in leave;
}

/** Ends one call of `userId` that used `tokens`, as a turn does. */
async function callUsing(budgets: TokenBudgets, userId: string, tokens: number): Promise<void> {
  const leave = await budgets.beforeCall(userId, 'session-1', 0);
  if (!isPermit(leave)) throw new Error(`the call was refused: ${leave.budget}`);
  leave.end(usage(tokens - Math.floor(tokens / 4), Math.floor(tokens / 4)));
}

for (const target of databaseTargets()) {
  describe(`token budgets on ${target.name}`, () => {
    let database: TestDatabase;
    let store: TokenUsageStore;
    let events: EventBus;
    let writer: DurableWriter;
    let clock: number;
    let refusals: Array<RuntimeEvents['budget:exceeded']>;

    const budgetsOf = (config: BudgetsConfig, on: TokenUsageStore = store) => new TokenBudgets({ config, store: on, writer, events, now: () => clock });
    const withDefault = (limits: Partial<typeof NO_BUDGETS>, users: BudgetsConfig['users'] = {}): BudgetsConfig => ({ default: { ...NO_BUDGETS, ...limits }, users });

    before(async () => {
      database = await target.open({ vector: false });
      await migrateToLatest(database, { vector: false, embeddingDimensions: 3 });
      store = createTokenUsageRepository(database.db);
    });
    beforeEach(() => {
      clock = AFTERNOON;
      events = new EventBus();
      writer = new DurableWriter(events, { initialDelayMs: 5 });
      refusals = [];
      events.on('budget:exceeded', (refusal) => refusals.push(refusal));
    });
    after(async () => {
      await database?.close();
    });

    describe('the counter', () => {
      it("adds calls to their user's day, summing calls of one batch, and reads the day and the days since", async () => {
        const [user, other] = [randomUUID(), randomUUID()];
        // Committed together (one group commit): the two adds of one user and day become one row.
        await Promise.all([
          store.add([{ userId: user, day: '2026-11-28', promptTokens: 30, completionTokens: 5 }]),
          store.add([{ userId: user, day: '2026-11-28', promptTokens: 10, completionTokens: 5 }]),
          store.add([{ userId: user, day: '2026-11-02', promptTokens: 100, completionTokens: 0 }]),
          store.add([{ userId: user, day: '2026-10-31', promptTokens: 1000, completionTokens: 0 }]),
          store.add([{ userId: other, day: '2026-11-28', promptTokens: 7, completionTokens: 0 }]),
        ]);
        await store.add([{ userId: user, day: '2026-11-28', promptTokens: 1, completionTokens: 1 }]);
        expect(await store.used(user, '2026-11-28', '2026-11-01')).to.deep.equal({ day: 52, since: 152 });
        expect(await store.used(other, '2026-11-28', '2026-11-01')).to.deep.equal({ day: 7, since: 7 });
        expect(await store.used(randomUUID(), '2026-11-28', '2026-11-01')).to.deep.equal({ day: 0, since: 0 });
      });
    });

    describe('before a request', () => {
      it('admits a user below the day budget and refuses one at it, with 429 insufficient_quota naming the budget and its reset', async () => {
        const user = randomUUID();
        const budgets = budgetsOf(withDefault({ tokens_per_day: 100 }));
        await callUsing(budgets, user, 99);
        await writer.flush();
        await budgets.admit(user);
        await callUsing(budgets, user, 1);
        await writer.flush();
        const error = (await rejection(budgets.admit(user))) as ServiceError;
        expect(isServiceError(error)).to.equal(true);
        expect(error).to.include({ status: 429, code: 'INSUFFICIENT_QUOTA', type: 'insufficient_quota' });
        expect(error.message).to.include('budgets.default.tokens_per_day').and.to.include('2026-11-29T00:00:00.000Z').and.to.include('has used 100');
        expect(error.details).to.deep.equal({ budget: 'tokens_per_day', limit: 100, used: 100, resets_at: Date.UTC(2026, 10, 29) / 1000 });
        expect(error.headers).to.deep.equal({ 'x-should-retry': 'false', 'Retry-After': String(9 * 3600) });
        expect(refusals).to.have.length(1);
        expect(refusals[0]).to.deep.include({ userId: user, sessionId: null, budget: 'tokens_per_day', refused: 'request', first: true, resetsAt: Date.UTC(2026, 10, 29) });
      });

      it('counts the day again from nothing at midnight (UTC), and the month on, until the first of the next month', async () => {
        const user = randomUUID();
        const budgets = budgetsOf(withDefault({ tokens_per_day: 100, tokens_per_month: 250 }));
        await callUsing(budgets, user, 100);
        await writer.flush();
        await rejection(budgets.admit(user));
        clock = Date.UTC(2026, 10, 29, 0, 0, 1);
        await budgets.admit(user);
        await callUsing(budgets, user, 100);
        clock = Date.UTC(2026, 10, 30, 12);
        await callUsing(budgets, user, 60);
        await writer.flush();
        // 260 this month: the month's budget refuses, with no Retry-After (it resets in more than a day).
        const error = (await rejection(budgets.admit(user))) as ServiceError;
        expect(error.details).to.include({ budget: 'tokens_per_month', limit: 250, used: 260, resets_at: Date.UTC(2026, 11, 1) / 1000 });
        expect(error.headers).to.deep.equal({ 'x-should-retry': 'false', 'Retry-After': String(12 * 3600) });
        clock = Date.UTC(2026, 11, 1, 0, 0, 1);
        await budgets.admit(user);
        expect(await budgets.statusOf(user)).to.deep.equal([
          { budget: 'tokens_per_day', limit: 100, used: 0, remaining: 100, resetsAt: new Date(Date.UTC(2026, 11, 2)) },
          { budget: 'tokens_per_month', limit: 250, used: 0, remaining: 250, resetsAt: new Date(Date.UTC(2027, 0, 1)) },
        ]);
      });

      it("gives Retry-After only when the budget resets within a day", async () => {
        const user = randomUUID();
        const budgets = budgetsOf(withDefault({ tokens_per_month: 10 }));
        await callUsing(budgets, user, 10);
        await writer.flush();
        const error = (await rejection(budgets.admit(user))) as ServiceError;
        expect(error.headers).to.deep.equal({ 'x-should-retry': 'false' });
      });

      it("applies a user's own budgets in place of the default's, key by key; 0 lifts a limit", async () => {
        const [alice, bob, carol] = ['alice', 'bob', randomUUID()];
        const config = withDefault({ tokens_per_day: 50, tokens_per_turn: 30 }, { alice: { tokens_per_day: 500 }, bob: { tokens_per_day: 0 } });
        const budgets = budgetsOf(config);
        expect(budgets.limitsOf(alice)).to.deep.equal({ tokens_per_day: 500, tokens_per_month: 0, tokens_per_turn: 30 });
        expect(budgets.limitsOf(bob)).to.deep.equal({ tokens_per_day: 0, tokens_per_month: 0, tokens_per_turn: 30 });
        // The names alice and bob are shared by every target's run: the counter is read for today only.
        clock = AFTERNOON + Math.floor(Math.random() * 1000) * 86_400_000;
        for (const user of [alice, carol]) await callUsing(budgets, user, 60);
        await writer.flush();
        await budgets.admit(alice);
        const error = (await rejection(budgets.admit(carol))) as ServiceError;
        expect(error.message).to.include('budgets.default.tokens_per_day');
        // bob has no day or month budget: nothing of his is counted, and he is never refused.
        await callUsing(budgets, bob, 1_000);
        await writer.flush();
        await budgets.admit(bob);
        expect(await store.used(bob, new Date(clock).toISOString().slice(0, 10), '2000-01-01')).to.deep.equal({ day: 0, since: 0 });
        expect(await budgets.statusOf(bob)).to.deep.equal([{ budget: 'tokens_per_turn', limit: 30, used: null, remaining: null, resetsAt: null }]);
        await callUsing(budgets, alice, 440);
        await writer.flush();
        expect(((await rejection(budgets.admit(alice))) as ServiceError).message).to.include('budgets.users.alice.tokens_per_day');
      });

      it("sees the calls another process counted: the database is the one counter", async () => {
        const user = randomUUID();
        const peer = await database.openPeer();
        try {
          const here = budgetsOf(withDefault({ tokens_per_day: 100 }));
          const there = budgetsOf(withDefault({ tokens_per_day: 100 }), createTokenUsageRepository(peer.db));
          await callUsing(there, user, 70);
          await writer.flush();
          await here.admit(user);
          await callUsing(here, user, 30);
          await writer.flush();
          await rejection(there.admit(user));
          await rejection(here.admit(user));
        } finally {
          if (peer !== database) await peer.close();
        }
      });

      it('counts a call at once in its process, before its write commits', async () => {
        const user = randomUUID();
        // A counter whose writes never commit while the test looks.
        let commit: () => void = () => undefined;
        const held: TokenUsageStore = { used: (...args) => store.used(...args), add: (entries) => new Promise<void>((resolve) => (commit = () => void store.add(entries).then(resolve))) };
        const budgets = budgetsOf(withDefault({ tokens_per_day: 100 }), held);
        await callUsing(budgets, user, 100);
        await rejection(budgets.admit(user));
        commit();
        await writer.flush();
        // Committed: counted once, not twice.
        expect((await budgets.statusOf(user))[0]).to.include({ used: 100, remaining: 0 });
      });
    });

    describe('before each call of a turn', () => {
      it("stops a turn at its own budget, announcing each stop, without reading the counter", async () => {
        const user = randomUUID();
        const budgets = budgetsOf(withDefault({ tokens_per_turn: 120 }));
        const first = await budgets.beforeCall(user, 'session-1', 0);
        expect(isPermit(first)).to.equal(true);
        expect(isPermit(await budgets.beforeCall(user, 'session-1', 119))).to.equal(true);
        const stop = await budgets.beforeCall(user, 'session-1', 120);
        expect(stop).to.deep.equal({ budget: 'tokens_per_turn', limit: 120, used: 120, resetsAt: null });
        await budgets.beforeCall(user, 'session-2', 150);
        expect(refusals.map((refusal) => [refusal.sessionId, refusal.refused, refusal.first])).to.deep.equal([
          ['session-1', 'llm_call', true],
          ['session-2', 'llm_call', true],
        ]);
      });

      it('stops a turn when the day is used up, and announces the first refusal of the day only as first', async () => {
        const user = randomUUID();
        const budgets = budgetsOf(withDefault({ tokens_per_day: 100 }));
        await callUsing(budgets, user, 100);
        const stop = await budgets.beforeCall(user, 'session-1', 0);
        expect(stop).to.include({ budget: 'tokens_per_day', used: 100 });
        await rejection(budgets.admit(user));
        expect(refusals.map((refusal) => [refusal.refused, refusal.first])).to.deep.equal([
          ['llm_call', true],
          ['request', false],
        ]);
        clock += 24 * HOUR;
        await callUsing(budgets, user, 100);
        await rejection(budgets.admit(user));
        expect(refusals.at(-1)).to.include({ refused: 'request', first: true });
        await writer.flush();
      });

      it("holds room for a user's calls in flight: a call waits while they could use what is left, so the budget is passed by one call at most", async () => {
        const user = randomUUID();
        const budgets = budgetsOf(withDefault({ tokens_per_day: 100 }));
        // The largest call seen here so far: 40 tokens.
        await callUsing(budgets, user, 40);
        const first = await budgets.beforeCall(user, 'session-1', 0);
        if (!isPermit(first)) throw new Error('refused');
        // 40 used, one call in flight (reckoned 40): 80 < 100, a second may start.
        const second = await budgets.beforeCall(user, 'session-2', 0);
        if (!isPermit(second)) throw new Error('refused');
        // 40 used and two in flight (80): 120 ≥ 100, a third waits for one of them.
        let third: CallPermit | BudgetReached | undefined;
        const waiting = budgets.beforeCall(user, 'session-3', 0).then((leave) => (third = leave));
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(third).to.equal(undefined);
        first.end(usage(30, 10));
        second.end(usage(15, 5));
        await waiting;
        // 100 used when it could check again: refused, never called.
        expect(third).to.include({ budget: 'tokens_per_day', used: 100 });
        await writer.flush();
        expect(budgets.trackedUsers, 'users remembered once nothing of theirs is in flight or uncommitted').to.equal(0);
      });

      it("lets a user's calls go one at a time until a call has ended in the process: nothing yet tells how large one is", async () => {
        const user = randomUUID();
        const budgets = budgetsOf(withDefault({ tokens_per_day: 1_000_000 }));
        const first = await budgets.beforeCall(user, 'session-1', 0);
        if (!isPermit(first)) throw new Error('refused');
        let second: CallPermit | BudgetReached | undefined;
        const waiting = budgets.beforeCall(user, 'session-2', 0).then((leave) => (second = leave));
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(second).to.equal(undefined);
        first.end(usage(80, 20));
        await waiting;
        if (!second || !isPermit(second)) throw new Error('refused');
        // One call of 100 seen: with 999,900 left, the next goes at once beside the one in flight.
        const third = await budgets.beforeCall(user, 'session-3', 0);
        expect(isPermit(third)).to.equal(true);
        second.end(null);
        if (isPermit(third)) third.end(null);
        await writer.flush();
      });

      it("counts every call of a user on one entry while any of them checks: a call that ended does not drop the others' count", async () => {
        const user = randomUUID();
        const budgets = budgetsOf(withDefault({ tokens_per_day: 100 }));
        await callUsing(budgets, user, 40);
        const first = await budgets.beforeCall(user, 'session-1', 0);
        const second = await budgets.beforeCall(user, 'session-2', 0);
        if (!isPermit(first) || !isPermit(second)) throw new Error('refused');
        // A third waits (40 used, 80 held); the two end, the second while the third checks again.
        const third = budgets.beforeCall(user, 'session-3', 0);
        await new Promise((resolve) => setTimeout(resolve, 20));
        first.end(usage(5, 5));
        second.end(usage(5, 5));
        // 60 used: the third may go, and a fourth beside it only within what is left (60 + 40 held: no).
        const leave = await third;
        if (!isPermit(leave)) throw new Error('refused');
        let fourth: CallPermit | BudgetReached | undefined;
        const waiting = budgets.beforeCall(user, 'session-4', 0).then((next) => (fourth = next));
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(fourth, 'the fourth waits for the third').to.equal(undefined);
        leave.end(usage(30, 10));
        await waiting;
        expect(fourth).to.include({ budget: 'tokens_per_day', used: 100 });
        await writer.flush();
        expect(budgets.trackedUsers).to.equal(0);
      });

      it('counts a call that ended while the counter was being read: it is in neither the read nor the calls in flight', async function () {
        // Each read waits its bound (1 s) for the writes that never commit here.
        this.timeout(10_000);
        const user = randomUUID();
        // A counter whose reads answer what they found only when let go, and whose writes wait too.
        let letReadGo: () => void = () => undefined;
        let readArrived: () => void = () => undefined;
        const arrived = new Promise<void>((resolve) => (readArrived = resolve));
        let reads = 0;
        const slow: TokenUsageStore = {
          used: async (...args) => {
            const found = await store.used(...args);
            if (++reads === 3) {
              readArrived();
              await new Promise<void>((resolve) => (letReadGo = resolve));
            }
            return found;
          },
          add: () => new Promise<void>(() => undefined),
        };
        const budgets = budgetsOf(withDefault({ tokens_per_day: 50 }), slow);
        // A call of 1 token, not yet committed: the user's uncommitted tokens are what a call's end adds to.
        await callUsing(budgets, user, 1);
        const first = await budgets.beforeCall(user, 'session-1', 0);
        if (!isPermit(first)) throw new Error('refused');
        // The second call's read finds nothing used; the first ends (60 tokens) before the read answers.
        const second = budgets.beforeCall(user, 'session-2', 0);
        await arrived;
        first.end(usage(50, 10));
        letReadGo();
        expect(await second).to.include({ budget: 'tokens_per_day', used: 61 });
      });

      it('gives up waiting when its turn is cancelled', async () => {
        const user = randomUUID();
        const budgets = budgetsOf(withDefault({ tokens_per_day: 100 }));
        await callUsing(budgets, user, 60);
        const first = await budgets.beforeCall(user, 'session-1', 0);
        if (!isPermit(first)) throw new Error('refused');
        const cancel = new AbortController();
        const waiting = budgets.beforeCall(user, 'session-2', 0, cancel.signal);
        cancel.abort(new Error('cancelled'));
        expect(((await rejection(waiting)) as Error).message).to.equal('cancelled');
        first.end(null);
        // Nothing is left waiting or in flight: the next call checks and goes.
        await writer.flush();
        expect(budgets.trackedUsers).to.equal(0);
        expect(isPermit(await budgets.beforeCall(user, 'session-3', 0))).to.equal(true);
        await writer.flush();
      });
    });
  });
}
