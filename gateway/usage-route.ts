import { Router, type RequestHandler } from 'express';
import type { SessionStore } from '../runtime/ports.js';
import { usageTotal, withTotal } from '../runtime/sessions/call-records.js';
import { actingUser } from './api-keys.js';
import { checkIdentifier } from './chat-request.js';
import { singleQuery } from './list-query.js';

/** What `GET /v1/usage` is built from. */
export type UsageRouterDeps = {
  sessions: SessionStore;
  /** The API key guard the route sits behind. */
  requireKey: RequestHandler;
  /** The user of requests that name none (`memory.user_id`). */
  defaultUserId: string;
};

/**
 * `GET /v1/usage?user_id=`: the tokens a user's LLM calls used, over all their sessions (deleted
 * ones too), in all and by model, as the LLM server reported them. Behind an API key; a key
 * bound to a user sees that user only (naming another is 403).
 */
export function createUsageRouter(deps: UsageRouterDeps): Router {
  const router = Router();
  router.get('/v1/usage', deps.requireKey, async (req, res) => {
    const named = actingUser(res, [{ value: singleQuery(req, 'user_id'), param: 'user_id' }]);
    const userId = named === undefined ? deps.defaultUserId : checkIdentifier(named, 'user_id');
    const { sessions, usage } = await deps.sessions.usageOf(userId);
    const byModel = Object.entries(usage)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([model, tokens]) => ({ model, ...withTotal(tokens) }));
    res.json({ object: 'usage', user_id: userId, sessions, ...usageTotal(usage), by_model: byModel });
  });
  return router;
}
