import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The ids of the request being served, which its log lines carry: the request id from the
 * start, the session and the user once the gateway knows them.
 */
export type RequestContext = { requestId: string; sessionId?: string; userId?: string };

const storage = new AsyncLocalStorage<RequestContext>();

/** Runs `serve` (the rest of a request) with `context` as the request context of everything it does, awaited or not. */
export function runInRequestContext<T>(context: RequestContext, serve: () => T): T {
  return storage.run(context, serve);
}

/** The context of the request being served, if any. */
export function currentRequestContext(): RequestContext | undefined {
  return storage.getStore();
}

/** Records the session or the user of the request being served, so its later lines and its request line carry them. */
export function noteRequestIds(ids: { sessionId?: string; userId?: string }): void {
  const context = storage.getStore();
  if (!context) return;
  if (ids.sessionId !== undefined) context.sessionId = ids.sessionId;
  if (ids.userId !== undefined) context.userId = ids.userId;
}
