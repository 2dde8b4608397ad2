/**
 * The ids a request's log lines carry: the service's request id and the client's X-Request-ID
 * (when sane) from the start, the user and the session once the gateway knows them. Kept in
 * two maps, not in AsyncLocalStorage: on Node 20 that hooks every promise of the process,
 * which measured 15% of the service's throughput.
 * - By request id, while the request is open: its request line and `userOf` read and note here.
 * - By session id, while a turn of the session runs for the request (a background response's
 *   turn outlives its request): a log line about the session gets the request's ids.
 */
export type RequestContext = {
  requestId: string;
  clientRequestId?: string;
  sessionId?: string;
  userId?: string;
  /** Tracing on: the request span's trace and span ids (when sampled), written as `trace_id` and `span_id`. */
  traceId?: string;
  spanId?: string;
};

const byRequest = new Map<string, RequestContext>();
const bySession = new Map<string, RequestContext>();

/**
 * Opens the context of a request that starts; closed with `closeRequestContext` when it ends.
 * `requestId` must be unique (the service's own): a second context of the same id replaces the first.
 */
export function openRequestContext(requestId: string, clientRequestId?: string): RequestContext {
  const context: RequestContext = clientRequestId === undefined ? { requestId } : { requestId, clientRequestId };
  byRequest.set(requestId, context);
  return context;
}

/** Forgets an ended request (the turns it started keep their session's context until they end). */
export function closeRequestContext(context: RequestContext): void {
  if (byRequest.get(context.requestId) === context) byRequest.delete(context.requestId);
}

/**
 * Records the user or the session a request acts on. A session is recorded until
 * `releaseSession`: lines about it meanwhile carry the request's ids. Without `requestId`, nothing.
 */
export function noteRequestIds(requestId: string | undefined, ids: { sessionId?: string; userId?: string }): void {
  if (requestId === undefined) return;
  const context = byRequest.get(requestId) ?? { requestId };
  if (ids.userId !== undefined) context.userId = ids.userId;
  if (ids.sessionId !== undefined) {
    context.sessionId = ids.sessionId;
    bySession.set(ids.sessionId, context);
  }
}

/** Records the ids of the request's span (tracing on, the span sampled): its lines, and its session's meanwhile, carry them. */
export function noteTraceIds(requestId: string, ids: { traceId: string; spanId: string }): void {
  const context = byRequest.get(requestId);
  if (!context) return;
  context.traceId = ids.traceId;
  context.spanId = ids.spanId;
}

/** A turn of the session for the request ended: lines about the session no longer name the request. */
export function releaseSession(sessionId: string, requestId: string | undefined): void {
  if (bySession.get(sessionId)?.requestId === requestId) bySession.delete(sessionId);
}

/** The context of the request whose turn of the session runs now, if any. */
export function contextOfSession(sessionId: string): RequestContext | undefined {
  return bySession.get(sessionId);
}
