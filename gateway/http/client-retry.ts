import type { Request } from 'express';

/** The openai SDKs (Stainless-generated, Node and Python) number each attempt of a request: 0 the first, 1 and up its retries. */
const RETRY_COUNT_HEADER = 'x-stainless-retry-count';

/** Whether the client says the request is another attempt at one that failed (its connection broke, it timed out). */
export function isClientRetry(req: Request): boolean {
  const count = Number(req.get(RETRY_COUNT_HEADER));
  return Number.isSafeInteger(count) && count > 0;
}
