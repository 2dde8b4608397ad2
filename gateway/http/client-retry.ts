import type { Request, Response } from 'express';

/** The openai SDKs (Stainless-generated, Node and Python) number each attempt of a request: 0 the first, 1 and up its retries. */
const RETRY_COUNT_HEADER = 'x-stainless-retry-count';

/**
 * Whether the request is another attempt at one that failed (its connection broke, it timed
 * out, its worker died): the client says so, or its `Idempotency-Key` was left running by an
 * earlier attempt (`answeredByKey` notes it).
 */
export function isClientRetry(req: Request, res: Response): boolean {
  if (res.locals.retriesKey === true) return true;
  const count = Number(req.get(RETRY_COUNT_HEADER));
  return Number.isSafeInteger(count) && count > 0;
}
