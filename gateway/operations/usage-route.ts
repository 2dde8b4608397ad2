import { Router, type Request, type RequestHandler } from 'express';
import type { SessionCursor, SessionStore, SessionUsage } from '../../runtime/ports.js';
import { mergeUsage, usageTotal, withTotal } from '../../runtime/sessions/call-records.js';
import { ServiceError } from '../../runtime/service-error.js';
import type { BudgetStatus, TokenBudgets } from '../../runtime/usage/token-budgets.js';
import { actingUser, isAdminCaller } from '../http/api-keys.js';
import { singleQuery } from '../http/list-query.js';
import { checkIdentifier } from '../http/text-rules.js';

/** What `GET /v1/usage` is built from. */
export type UsageRouterDeps = {
  sessions: SessionStore;
  /** The token budgets (none: no budget is set, and the answer has no `budgets`). */
  budgets?: Pick<TokenBudgets, 'statusOf'>;
  /** The API key guard the route sits behind. */
  requireKey: RequestHandler;
};

/** Sessions read a page at a time when usage is added up from the list of sessions. */
const PAGE_SIZE = 200;

/** A window of activity in ms since the epoch, from `start_time` (inclusive) to `end_time` (exclusive); either end may be open. */
type ActivityWindow = { start?: number; end?: number };

/** A user's sessions counted, and their tokens by model. */
type UserUsage = { sessions: number; usage: SessionUsage };

/**
 * `GET /v1/usage?user_id=&start_time=&end_time=`: the tokens LLM calls used, in all and by
 * model, as the LLM server reported them. Behind an API key: a key bound to a user sees that
 * user only (naming another is 403); an admin key names any user, and without `user_id` gets
 * every user's, in all and `by_user`.
 *
 * The service keeps each session's running total, not when each turn used its tokens: a
 * window (Unix seconds, as OpenAI's usage API takes them) selects the sessions active in it
 * (made before its end, last active at or after its start) and counts their whole totals. A
 * window or every user reads the live sessions; one user without a window reads the stored
 * totals, deleted sessions included.
 *
 * With token budgets set, one user's answer also has `budgets`: each budget the user has, its
 * limit, what is used and left of it now and when it resets (Unix seconds), whatever the window.
 */
export function createUsageRouter(deps: UsageRouterDeps): Router {
  const router = Router();
  router.get('/v1/usage', deps.requireKey, async (req, res) => {
    const window = windowOf(req);
    const named = actingUser(res, [{ value: singleQuery(req, 'user_id'), param: 'user_id' }]);
    // A key bound to a user gets its user from actingUser: only an admin key is left naming none.
    if (named === undefined && !isAdminCaller(res)) {
      throw new ServiceError('FORBIDDEN', "Only an admin key (bound to no user) reads every user's usage: name the user in user_id.", { param: 'user_id' });
    }
    const userId = named === undefined ? undefined : checkIdentifier(named, 'user_id');
    const byUser =
      userId !== undefined && window.start === undefined && window.end === undefined
        ? new Map([[userId, await deps.sessions.usageOf(userId)]])
        : await activeUsage(deps.sessions, userId, window);
    const all = [...byUser.values()].reduce<UserUsage>((sum, one) => ({ sessions: sum.sessions + one.sessions, usage: mergeUsage(sum.usage, one.usage) }), {
      sessions: 0,
      usage: {},
    });
    const budgets = deps.budgets && userId !== undefined ? (await deps.budgets.statusOf(userId)).map(budgetJson) : undefined;
    const byModel = Object.entries(all.usage)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([model, tokens]) => ({ model, ...withTotal(tokens) }));
    res.json({
      object: 'usage',
      user_id: userId ?? null,
      start_time: secondsOf(window.start),
      end_time: secondsOf(window.end),
      sessions: all.sessions,
      ...usageTotal(all.usage),
      by_model: byModel,
      ...(budgets ? { budgets } : {}),
      ...(userId === undefined
        ? {
            by_user: [...byUser.entries()]
              .sort(([a], [b]) => a.localeCompare(b))
              .map(([user, { sessions, usage }]) => ({ user_id: user, sessions, ...usageTotal(usage) })),
          }
        : {}),
    });
  });
  return router;
}

/** The window `start_time` and `end_time` (whole Unix seconds) ask for; a 400 naming the bad one. */
function windowOf(req: Request): ActivityWindow {
  const start = unixSeconds(req, 'start_time');
  const end = unixSeconds(req, 'end_time');
  if (start !== undefined && end !== undefined && end <= start) {
    throw new ServiceError('INVALID_REQUEST', 'end_time must be after start_time', { param: 'end_time' });
  }
  return { ...(start !== undefined ? { start: start * 1000 } : {}), ...(end !== undefined ? { end: end * 1000 } : {}) };
}

function unixSeconds(req: Request, name: string): number | undefined {
  const raw = singleQuery(req, name);
  if (raw === undefined) return undefined;
  const seconds = /^\d{1,12}$/.test(raw) ? Number(raw) : NaN;
  if (Number.isNaN(seconds)) throw new ServiceError('INVALID_REQUEST', `${name} must be a time in whole Unix seconds`, { param: name });
  return seconds;
}

/** A budget as the answer shows it: `used`, `remaining` and `resets_at` null for a turn's budget. */
function budgetJson(status: BudgetStatus) {
  return {
    budget: status.budget,
    limit: status.limit,
    used: status.used,
    remaining: status.remaining,
    resets_at: status.resetsAt ? Math.floor(status.resetsAt.getTime() / 1000) : null,
  };
}

function secondsOf(ms: number | undefined): number | null {
  return ms === undefined ? null : ms / 1000;
}

/**
 * The usage of the live sessions active in `window`, by user (of `userId` only, when given),
 * read from the list of sessions, most recently active first: the first one last active
 * before the window's start ends the reading.
 */
async function activeUsage(store: SessionStore, userId: string | undefined, window: ActivityWindow): Promise<Map<string, UserUsage>> {
  const byUser = new Map<string, UserUsage>();
  let after: SessionCursor | undefined;
  do {
    const page = await store.list({ ...(userId !== undefined ? { userId } : {}), limit: PAGE_SIZE, ...(after ? { after } : {}) });
    for (const session of page.sessions) {
      if (window.start !== undefined && session.lastActive.getTime() < window.start) return byUser;
      if (window.end !== undefined && session.createdAt.getTime() >= window.end) continue;
      const entry = byUser.get(session.userId) ?? { sessions: 0, usage: {} };
      byUser.set(session.userId, { sessions: entry.sessions + 1, usage: mergeUsage(entry.usage, session.usage) });
    }
    after = page.next ?? undefined;
  } while (after);
  return byUser;
}
