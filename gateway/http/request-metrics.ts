import type { Request, RequestHandler } from 'express';
import type { ServiceMetrics } from '../../runtime/observability/metrics.js';

/** The route label of requests no route took: unknown paths, and requests refused before routing. */
const UNMATCHED_ROUTE = 'unmatched';
/** The status label of a request whose client left before the response began (nginx's convention). */
const CLIENT_CLOSED = 499;

/**
 * Counts every request and times it to the end of its response (`finish`), or to the client
 * leaving (`close`), whichever comes first. Placed before the other middleware, so requests
 * they refuse are counted too.
 */
export function createRequestMetrics(metrics: ServiceMetrics): RequestHandler {
  return (req, res, next) => {
    const started = performance.now();
    let isRecorded = false;
    const record = () => {
      if (isRecorded) return;
      isRecorded = true;
      const status = res.headersSent ? res.statusCode : CLIENT_CLOSED;
      metrics.observeRequest({ method: req.method, route: routeOf(req), status }, (performance.now() - started) / 1000);
    };
    res.once('finish', record);
    res.once('close', record);
    next();
  };
}

/** The pattern of the route that took the request (e.g. `/v1/agents/:agent_id`), never the raw URL. */
function routeOf(req: Request): string {
  const path: unknown = req.route?.path;
  // The routers here are mounted at the root; `baseUrl` keeps the prefix of one mounted elsewhere while it answers.
  return typeof path === 'string' ? req.baseUrl + path : UNMATCHED_ROUTE;
}
