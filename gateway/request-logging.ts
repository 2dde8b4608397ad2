import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import type { Logger } from 'winston';

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/** Gives every request an id (kept from X-Request-ID when sane) and logs one line when it ends. */
export function createRequestLogging(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const incoming = req.get('x-request-id');
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.locals.requestId = requestId;
    res.set('X-Request-ID', requestId);
    const started = performance.now();
    if (!logger.isInfoEnabled()) {
      next();
      return;
    }
    res.on('close', () => {
      const durationMs = Math.round((performance.now() - started) * 10) / 10;
      logger.info(`${req.method} ${req.path} ${res.statusCode} ${durationMs}ms`, {
        requestId,
        status: res.statusCode,
        durationMs,
        ...(res.writableFinished ? {} : { clientClosed: true }),
      });
    });
    next();
  };
}
