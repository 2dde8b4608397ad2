import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import type { Logger } from 'winston';
import { closeRequestContext, openRequestContext } from './request-context.js';

/** A client's X-Request-ID worth logging: printable ASCII, 1 to 128 characters. */
const CLIENT_REQUEST_ID = /^[\x20-\x7e]{1,128}$/;

/** A new request id of the service's own, in OpenAI's form: `req_` and 32 hex digits. */
function newRequestId(): string {
  return `req_${randomUUID().replaceAll('-', '')}`;
}

/**
 * Gives every request an id of the service's own (never the client's: two clients sending the
 * same X-Request-ID would share a request context, and one's log lines would carry the other's
 * ids), answered in X-Request-ID as OpenAI answers its own. Opens the request context (see
 * request-context.ts) with the client's X-Request-ID beside it when sane, and logs one line
 * when the request ends, with the session and user once known.
 */
export function createRequestLogging(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const requestId = newRequestId();
    res.locals.requestId = requestId;
    res.set('X-Request-ID', requestId);
    const incoming = req.get('x-request-id');
    const context = openRequestContext(requestId, incoming !== undefined && CLIENT_REQUEST_ID.test(incoming) ? incoming : undefined);
    const started = performance.now();
    res.on('close', () => {
      closeRequestContext(context);
      if (!logger.isInfoEnabled()) return;
      const durationMs = Math.round((performance.now() - started) * 10) / 10;
      // originalUrl: a router mounted on a path (/inspect) strips it from req.path; the query may hold secrets (a login link's sig).
      const path = req.originalUrl.split('?', 1)[0];
      logger.info(`${req.method} ${path} ${res.statusCode} ${durationMs}ms`, {
        ...context,
        status: res.statusCode,
        durationMs,
        ...(res.writableFinished ? {} : { clientClosed: true }),
      });
    });
    next();
  };
}
