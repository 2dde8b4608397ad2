import { BUDGET_NAMES, NO_BUDGETS, type BudgetLimits, type BudgetName, type BudgetsConfig } from '../../config/budget-schema.js';
import type { Usage } from '../chat-types.js';
import type { EventBus } from '../observability/event-bus.js';
import type { TokenUsageStore } from '../ports.js';
import { ServiceError } from '../service-error.js';
import type { DurableWriter } from '../sessions/durable-writer.js';

/** A budget reached: which, its limit, what was used against it, and when it resets (null: a turn's). */
export type BudgetReached = { budget: BudgetName; limit: number; used: number; resetsAt: Date | null };

/** A budget of a user as `/v1/usage` shows it; a turn's budget has no use or reset of its own. */
export type BudgetStatus = { budget: BudgetName; limit: number; used: number | null; remaining: number | null; resetsAt: Date | null };

/** Leave to make one LLM call; `end` counts what the call used (null: it failed or counted nothing). Call it once. */
export type CallPermit = { end(usage: Usage | null): void };

/** What the budgets need. */
export type TokenBudgetsDeps = {
  config: BudgetsConfig;
  store: TokenUsageStore;
  /** Retries the counter's writes until they commit. */
  writer: DurableWriter;
  events: EventBus;
  now?: () => number;
};


/** How long a read of the counter waits for the user's writes under way to commit (they take milliseconds; in an outage, the read fails). */
const WRITE_WAIT_MS = 1_000;


/**
 * What this process holds of a user: the LLM calls in flight (`count`), the calls and reads
 * checking the budgets (`checking`; `waiting`, those of them waiting for a call to end), the
 * tokens counted and not yet committed by day, the tokens committed so far (a running sum), and
 * the writes under way.
 */
type UserState = {
  count: number;
  checking: number;
  waiting: Array<() => void>;
  uncommitted: Map<string, number>;
  committed: number;
  writes: Set<Promise<void>>;
};

/** Tokens used today and this month. */
type Use = { day: number; month: number };

function plus(use: Use, more: number): Use {
  return { day: use.day + more, month: use.month + more };
}

const DAY_MS = 86_400_000;

/** A permit for a user with no day or month budget: nothing to count. */
const UNCOUNTED: CallPermit = { end: () => undefined };

/**
 * The users' token budgets (`budgets.*`), counted where `/v1/usage` counts tokens: each LLM
 * call's usage as the turn adds it up (the service's estimate where the server sent none),
 * added to the user's day in PostgreSQL or PGlite, the one counter of every process.
 *
 * A request is refused before its turn starts when a day or month budget is used up; within a
 * turn, each LLM call is made only while the turn's, the day's and the month's budgets have
 * room. A call is checked against the counter as it stands plus this process's calls not yet
 * committed to it. The calls of one user in flight in this process hold room for each other: a
 * call waits while the calls in flight could together use what is left (each reckoned as large
 * as the largest call seen; before one has ended, as all that is left), so that this process
 * passes a budget by at most one call.
 */
export class TokenBudgets {
  private readonly now: () => number;
  /** The users with calls in flight or checking here, or tokens not yet committed. */
  private readonly users = new Map<string, UserState>();
  /** The most tokens one call has used here: the room a call in flight is reckoned to need. */
  private largestCall = 0;
  /** Writes of tokens made so far, to name each in the writer. */
  private writes = 0;
  /** The refusals announced as their period's first, and the day they belong to. */
  private announced = { day: '', keys: new Set<string>() };

  constructor(private readonly deps: TokenBudgetsDeps) {
    this.now = deps.now ?? Date.now;
  }

  /** How many users have calls in flight or checking here, or tokens not yet committed: the users a process keeps track of. */
  get trackedUsers(): number {
    return this.users.size;
  }

  /** The budgets of `userId`: the default's, with the user's own entry's keys in their place. */
  limitsOf(userId: string): BudgetLimits {
    const own = Object.hasOwn(this.deps.config.users, userId) ? this.deps.config.users[userId] : undefined;
    return own ? { ...NO_BUDGETS, ...this.deps.config.default, ...own } : this.deps.config.default;
  }

  /**
   * Admits a request of `userId` before anything of it is stored: throws INSUFFICIENT_QUOTA
   * (429, with Retry-After when the budget resets within a day) when its day or month budget is
   * used up.
   */
  async admit(userId: string): Promise<void> {
    const limits = this.limitsOf(userId);
    if (!countsPeriods(limits)) return;
    const reached = this.reachedOf(limits, await this.useToJudge(userId, limits, () => 0));
    if (!reached) return;
    this.announce(userId, null, reached, 'request');
    throw this.refusal(userId, reached);
  }

  /**
   * Leave for the next LLM call of a turn of `userId` that has used `turnTokens` so far, or the
   * budget that stops the turn (announced): the turn's, the day's or the month's. May wait for
   * the user's other calls in flight in this process.
   */
  async beforeCall(userId: string, sessionId: string, turnTokens: number, signal?: AbortSignal): Promise<CallPermit | BudgetReached> {
    const limits = this.limitsOf(userId);
    if (limits.tokens_per_turn > 0 && turnTokens >= limits.tokens_per_turn) {
      const reached = { budget: 'tokens_per_turn' as const, limit: limits.tokens_per_turn, used: turnTokens, resetsAt: null };
      this.announce(userId, sessionId, reached, 'llm_call');
      return reached;
    }
    if (!countsPeriods(limits)) return UNCOUNTED;
    // The user's state stays while this call checks, so every call of the user counts on the same one.
    const calls = this.stateOf(userId);
    calls.checking += 1;
    try {
      // Room for this call besides those in flight, each reckoned as large as the largest yet
      // (before any call has ended here, as large as all that is left: they go one at a time).
      const held = () => (calls.count === 0 ? 0 : this.largestCall > 0 ? calls.count * this.largestCall : Number.POSITIVE_INFINITY);
      for (;;) {
        const used = await this.useToJudge(userId, limits, held);
        const reached = this.reachedOf(limits, used);
        if (reached) {
          this.announce(userId, sessionId, reached, 'llm_call');
          return reached;
        }
        if (calls.count === 0 || this.reachedOf(limits, plus(used, held())) === undefined) {
          calls.count += 1;
          return this.permit(userId, calls);
        }
        await this.untilACallEnds(calls, signal);
      }
    } finally {
      calls.checking -= 1;
      this.dropIfIdle(userId, calls);
    }
  }

  /** The budgets `userId` has, each with what is used and left and when it resets (`/v1/usage`). */
  async statusOf(userId: string): Promise<BudgetStatus[]> {
    const limits = this.limitsOf(userId);
    // A read once the user's writes under way have committed: the figures /v1/usage shows beside it.
    const used = countsPeriods(limits) ? (await this.usedBy(userId, true)).high : { day: 0, month: 0 };
    const now = this.now();
    return BUDGET_NAMES.filter((budget) => limits[budget] > 0).map((budget) => {
      const limit = limits[budget];
      if (budget === 'tokens_per_turn') return { budget, limit, used: null, remaining: null, resetsAt: null };
      const spent = budget === 'tokens_per_day' ? used.day : used.month;
      return { budget, limit, used: spent, remaining: Math.max(0, limit - spent), resetsAt: resetOf(budget, now) };
    });
  }

  /**
   * The use of `userId` to judge `limits` by, with `held` more for the calls in flight: the low
   * figure of a read when even it reaches a budget, its high one when even that leaves room
   * (the one read most checks need); when the two disagree (near a budget, while the user's writes
   * commit), the high figure of a read made once those writes have committed.
   */
  private async useToJudge(userId: string, limits: BudgetLimits, held: () => number): Promise<Use> {
    const { low, high } = await this.usedBy(userId, false);
    if (this.reachedOf(limits, low)) return low;
    if (!this.reachedOf(limits, plus(high, held()))) return high;
    return (await this.usedBy(userId, true)).high;
  }

  /**
   * What a read of the counter tells of the use of `userId` today and this month: at least what
   * it read (`low`), at most that with this process's tokens not yet committed and those whose
   * write committed during the read (`high`): those may be in the read or not. `settled`: the
   * read waits first for the user's writes under way to commit (within a bound; in an outage the
   * read fails), so that the two figures differ by little.
   */
  private async usedBy(userId: string, settled: boolean): Promise<{ low: Use; high: Use }> {
    const { day, month } = periodsOf(this.now());
    const state = this.stateOf(userId);
    state.checking += 1;
    try {
      if (settled && state.writes.size > 0) await settledWithin(Promise.all(state.writes), WRITE_WAIT_MS);
      const committedBefore = state.committed;
      const read = await this.deps.store.used(userId, day, month);
      const committedDuring = state.committed - committedBefore;
      const high = { day: read.day + committedDuring, month: read.since + committedDuring };
      for (const [uncommittedDay, tokens] of state.uncommitted) {
        if (uncommittedDay === day) high.day += tokens;
        if (uncommittedDay >= month) high.month += tokens;
      }
      return { low: { day: read.day, month: read.since }, high };
    } finally {
      state.checking -= 1;
      this.dropIfIdle(userId, state);
    }
  }

  /** The first of the user's day and month budgets `used` reaches, if any. */
  private reachedOf(limits: BudgetLimits, used: Use): BudgetReached | undefined {
    const now = this.now();
    if (limits.tokens_per_day > 0 && used.day >= limits.tokens_per_day) {
      return { budget: 'tokens_per_day', limit: limits.tokens_per_day, used: used.day, resetsAt: resetOf('tokens_per_day', now) };
    }
    if (limits.tokens_per_month > 0 && used.month >= limits.tokens_per_month) {
      return { budget: 'tokens_per_month', limit: limits.tokens_per_month, used: used.month, resetsAt: resetOf('tokens_per_month', now) };
    }
    return undefined;
  }

  /** Waits until one of the user's calls in flight ends; throws the signal's reason if it aborts first. */
  private async untilACallEnds(calls: UserState, signal: AbortSignal | undefined): Promise<void> {
    signal?.throwIfAborted();
    let onAbort: (() => void) | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        calls.waiting.push(resolve);
        onAbort = () => {
          const at = calls.waiting.indexOf(resolve);
          if (at >= 0) calls.waiting.splice(at, 1);
          reject(signal!.reason);
        };
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    } finally {
      if (onAbort) signal?.removeEventListener('abort', onAbort);
    }
  }

  private stateOf(userId: string): UserState {
    let state = this.users.get(userId);
    if (!state) {
      state = { count: 0, checking: 0, waiting: [], uncommitted: new Map(), committed: 0, writes: new Set() };
      this.users.set(userId, state);
    }
    return state;
  }

  /** Forgets the user once nothing of theirs is in flight, checking (waiting is checking) or uncommitted. */
  private dropIfIdle(userId: string, state: UserState): void {
    if (state.count === 0 && state.checking === 0 && state.uncommitted.size === 0 && this.users.get(userId) === state) this.users.delete(userId);
  }

  /** The permit of a call counted against the user's day and month; its end counts it and lets the waiting calls check again. */
  private permit(userId: string, calls: UserState): CallPermit {
    let ended = false;
    return {
      end: (usage) => {
        if (ended) return;
        ended = true;
        // Counted before it leaves the calls in flight: its tokens are never out of both.
        if (usage) this.count(userId, calls, usage);
        calls.count -= 1;
        for (const wake of calls.waiting.splice(0)) wake();
        this.dropIfIdle(userId, calls);
      },
    };
  }

  /** Adds a call's tokens to the user's day: counted here at once, and in the database once the write commits (retried until it does). */
  private count(userId: string, state: UserState, usage: Usage): void {
    const tokens = usage.prompt_tokens + usage.completion_tokens;
    if (tokens <= 0) return;
    this.largestCall = Math.max(this.largestCall, tokens);
    const { day } = periodsOf(this.now());
    state.uncommitted.set(day, (state.uncommitted.get(day) ?? 0) + tokens);
    const entry = { userId, day, promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens };
    // Each write on its own: the writer retries a failed one until it commits (or the service
    // stops), and the writes of calls that end together commit as one statement, whatever their order.
    const write = this.deps.writer.write(`token-usage:${++this.writes}`, 'count tokens against the budgets', () => this.deps.store.add([entry])).then(
      () => done(true),
      () => done(false),
    );
    const done = (committed: boolean) => {
      if (committed) state.committed += tokens;
      state.writes.delete(write);
      const left = (state.uncommitted.get(day) ?? 0) - tokens;
      if (left > 0) state.uncommitted.set(day, left);
      else state.uncommitted.delete(day);
      this.dropIfIdle(userId, state);
    };
    state.writes.add(write);
  }

  /** Tells the event bus of a refusal (metrics, webhooks, logs); the first of its period in this process is marked so. */
  private announce(userId: string, sessionId: string | null, reached: BudgetReached, refused: 'request' | 'llm_call'): void {
    let first = true;
    if (reached.resetsAt) {
      const { day } = periodsOf(this.now());
      if (this.announced.day !== day) this.announced = { day, keys: new Set() };
      const key = `${reached.budget}\u0000${userId}`;
      first = !this.announced.keys.has(key);
      this.announced.keys.add(key);
    }
    this.deps.events.emit('budget:exceeded', {
      userId,
      sessionId,
      budget: reached.budget,
      limit: reached.limit,
      used: reached.used,
      resetsAt: reached.resetsAt?.getTime() ?? null,
      refused,
      first,
    });
  }

  /** The 429 of a request refused for `reached`, naming the budget's setting and when it resets. */
  private refusal(userId: string, reached: BudgetReached): ServiceError {
    const users = this.deps.config.users;
    const own = Object.hasOwn(users, userId) && users[userId]![reached.budget] !== undefined;
    const setting = own ? `budgets.users.${userId}.${reached.budget}` : `budgets.default.${reached.budget}`;
    const period = reached.budget === 'tokens_per_day' ? 'a day (UTC)' : 'a month (UTC)';
    const resetsAt = reached.resetsAt!;
    const waitSeconds = Math.max(1, Math.ceil((resetsAt.getTime() - this.now()) / 1000));
    const message =
      `Token budget used up: user ${userId} may use ${reached.limit} tokens in ${period} (${setting}) and has used ${reached.used}. ` +
      `It resets at ${resetsAt.toISOString()}.`;
    return new ServiceError('INSUFFICIENT_QUOTA', message, {
      details: { budget: reached.budget, limit: reached.limit, used: reached.used, resets_at: Math.floor(resetsAt.getTime() / 1000) },
      headers: {
        // A retry before the reset cannot succeed: the openai clients obey this header rather than retry a 429 at once.
        'x-should-retry': 'false',
        ...(waitSeconds <= DAY_MS / 1000 ? { 'Retry-After': String(waitSeconds) } : {}),
      },
    });
  }
}

/** Whether the limits have a day or a month budget: only those are counted. */
function countsPeriods(limits: BudgetLimits): boolean {
  return limits.tokens_per_day > 0 || limits.tokens_per_month > 0;
}

/** The day and the first day of the month (UTC, `YYYY-MM-DD`) that `now` falls in. */
export function periodsOf(now: number): { day: string; month: string } {
  const day = new Date(now).toISOString().slice(0, 10);
  return { day, month: `${day.slice(0, 7)}-01` };
}

/** When the day or month budget in force at `now` resets: the next midnight, or the next month's first, in UTC. */
function resetOf(budget: Exclude<BudgetName, 'tokens_per_turn'>, now: number): Date {
  const at = new Date(now);
  if (budget === 'tokens_per_day') return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1));
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1));
}

/** Resolves when `promise` settles or `ms` have passed, whichever is first. */
async function settledWithin(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([promise.catch(() => undefined), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
