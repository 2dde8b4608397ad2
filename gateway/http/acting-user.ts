import type { Request, Response } from 'express';
import { actingUser } from './api-keys.js';
import { noteRequestIds } from './request-context.js';
import { checkIdentifier } from './text-rules.js';

/**
 * The user a request of the OpenAI-style resource APIs (responses, conversations) acts as: the
 * API key's bound user, else the one named in X-User-ID, else `defaultUserId`. Recorded on the
 * request's context for its log lines.
 */
export function userOf(req: Request, res: Response, defaultUserId: string): string {
  const named = actingUser(res, [{ value: req.get('x-user-id'), param: 'X-User-ID' }]);
  const userId = checkIdentifier(named ?? defaultUserId, 'user_id');
  noteRequestIds(res.locals.requestId as string | undefined, { userId });
  return userId;
}
