import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import type { Logger } from 'winston';
import { closeRequestContext, openRequestContext } from './request-context.js';

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * Gives every request an id (kept from X-Request-ID when sane), opens its request context (see
 * request-context.ts), and logs one line when it ends, with the session and user once known.
 */
export function createRequestLogging(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const incoming = req.get('x-request-id');
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.locals.requestId = requestId;
    res.set('X-Request-ID', requestId);
    const context = openRequestContext(requestId);
    const started = performance.now();
    res.on('close', () => {
      closeRequestContext(context);
      if (!logger.isInfoEnabled()) return;
      const durationMs = Math.round((performance.now() - started) * 10) / 10;
      logger.info(`${req.method} ${req.path} ${res.statusCode} ${durationMs}ms`, {
        ...context,
        status: res.statusCode,
        durationMs,
        ...(res.writableFinished ? {} : { clientClosed: true }),
      });
    });
    next();
  };
}
