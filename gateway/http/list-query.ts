import type { Request } from 'express';
import { ServiceError } from '../../runtime/service-error.js';

/** Most entries of a listed page, and the default. */
const MAX_LIMIT = 100;
const DEFAULT_LIMIT = 20;

/** A query parameter given at most once; undefined when absent, a 400 naming it when repeated. */
export function singleQuery(req: Request, name: string): string | undefined {
  const value = req.query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new ServiceError('INVALID_REQUEST', `${name} must be given once, as a string`, { param: name });
  return value;
}

/** A list's `limit`: a whole number from 1 to 100, 20 when absent. */
export function listLimit(req: Request): number {
  const raw = singleQuery(req, 'limit');
  if (raw === undefined) return DEFAULT_LIMIT;
  const limit = /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!(limit >= 1 && limit <= MAX_LIMIT)) throw new ServiceError('INVALID_REQUEST', `limit must be a whole number from 1 to ${MAX_LIMIT}`, { param: 'limit' });
  return limit;
}

/** A list's `order`, as OpenAI's lists take it: `asc` or `desc` (the default). */
export function listOrder(req: Request): 'asc' | 'desc' {
  const order = singleQuery(req, 'order') ?? 'desc';
  if (order !== 'asc' && order !== 'desc') throw new ServiceError('INVALID_REQUEST', "order must be 'asc' or 'desc'", { param: 'order' });
  return order;
}
