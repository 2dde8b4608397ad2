import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import type { Logger } from 'winston';
import { runInRequestContext, type RequestContext } from './request-context.js';

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * Gives every request an id (kept from X-Request-ID when sane), serves the rest of it in its
 * request context (every line written meanwhile carries the id), and logs one line when it
 * ends, with the session and user once they are known.
 */
export function createRequestLogging(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const incoming = req.get('x-request-id');
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.locals.requestId = requestId;
    res.set('X-Request-ID', requestId);
    const context: RequestContext = { requestId };
    if (logger.isInfoEnabled()) {
      const started = performance.now();
      // 'close' is emitted outside the request's context: the line names its ids itself.
      res.on('close', () => {
        const durationMs = Math.round((performance.now() - started) * 10) / 10;
        logger.info(`${req.method} ${req.path} ${res.statusCode} ${durationMs}ms`, {
          ...context,
          status: res.statusCode,
          durationMs,
          ...(res.writableFinished ? {} : { clientClosed: true }),
        });
      });
    }
    runInRequestContext(context, next);
  };
}
