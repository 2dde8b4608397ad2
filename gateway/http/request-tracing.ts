import type { Request, RequestHandler } from 'express';
import type { RequestSpan, Tracing } from '../../runtime/observability/tracing.js';
import { noteTraceIds } from './request-context.js';

/** The spans of the requests open now, by request id, for the turns they start. */
const spans = new Map<string, RequestSpan>();

/**
 * A span per request (tracing on), the child of the `traceparent` the client sent: named by its
 * method, then by its route once one matched, ended with the status answered. Its ids join the
 * request's context, so its log lines (and its session's, while a turn runs for it) carry them.
 * Mounted after the request logging, which gives the request its id.
 */
export function createRequestTracing(tracing: Tracing): RequestHandler {
  return (req, res, next) => {
    const requestId = res.locals.requestId as string;
    const span = tracing.startRequest(req.method, req.originalUrl.split('?', 1)[0]!, { traceparent: req.get('traceparent'), tracestate: req.get('tracestate') });
    if (span.ids) noteTraceIds(requestId, span.ids);
    spans.set(requestId, span);
    res.on('close', () => {
      spans.delete(requestId);
      span.end(routeOf(req), res.statusCode);
    });
    next();
  };
}

/** The span of an open request (none: tracing is off, or the request has ended). */
export function requestSpanOf(requestId: string | undefined): RequestSpan | undefined {
  return requestId === undefined || spans.size === 0 ? undefined : spans.get(requestId);
}

/** The route that matched, with the path its router is mounted on (`/v1/responses/:id`); none when no route did. */
function routeOf(req: Request): string | undefined {
  const path = (req.route as { path?: unknown } | undefined)?.path;
  if (typeof path !== 'string') return undefined;
  // A router's own root (`/a2a` is the A2A SDK's router, whose route is `/`) is its mount path.
  return path === '/' && req.baseUrl !== '' ? req.baseUrl : `${req.baseUrl}${path}`;
}
