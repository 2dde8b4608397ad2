import type { ErrorRequestHandler, RequestHandler } from 'express';
import type { Logger } from 'winston';
import { isServiceError, ServiceError } from '../../runtime/service-error.js';

/** The OpenAI error object. */
export type OpenAiErrorBody = {
  error: { message: string; type: string; param: string | null; code: string | null; [extra: string]: unknown };
};

/** Errors raised by Express's body parser carry a `type` and a `status`; the router's carry a `status`. */
type BodyParserError = Error & { type?: string; status?: number; limit?: number };

/** Turns any error into a ServiceError: the one place errors meet HTTP. */
export function toServiceError(error: unknown): ServiceError {
  if (isServiceError(error)) return error;
  const parserError = error as BodyParserError;
  switch (parserError?.type) {
    case 'entity.parse.failed':
      return new ServiceError('INVALID_JSON', 'We could not parse the JSON body of your request.', { cause: error });
    case 'entity.too.large':
      return new ServiceError('PAYLOAD_TOO_LARGE', `The request body is larger than the limit of ${parserError.limit} bytes.`, { cause: error });
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new ServiceError('INVALID_REQUEST', parserError.message, { cause: error });
    case 'request.aborted':
    case 'request.size.invalid':
      return new ServiceError('INVALID_REQUEST', 'The request body was incomplete.', { cause: error });
  }
  // Other client errors of the HTTP layer: a malformed percent escape in the path (router), a body that does not decompress.
  if (typeof parserError?.status === 'number' && parserError.status >= 400 && parserError.status < 500) {
    return new ServiceError('INVALID_REQUEST', `The request could not be read: ${parserError.message}.`, { cause: error });
  }
  return new ServiceError('INTERNAL', 'The server had an error while processing your request.', { cause: error });
}

/** The response body of an error. */
export function errorBody(error: ServiceError): OpenAiErrorBody {
  return {
    error: {
      message: error.message,
      type: error.type,
      param: error.param,
      code: error.code.toLowerCase(),
      ...error.details,
    },
  };
}

/** 5xx errors that are no fault of the service's code: not logged with each request's stack. */
const UNLOGGED_CODES: ReadonlySet<string> = new Set(['SESSION_BUSY', 'DATABASE_UNAVAILABLE', 'MEMORY_UNAVAILABLE']);

/** Maps every error to the OpenAI error object with a fitting status; logs server faults with their stack. */
export function createErrorHandler(logger: Logger): ErrorRequestHandler {
  return (error, req, res, _next) => {
    const serviceError = toServiceError(error);
    if (serviceError.status >= 500 && !UNLOGGED_CODES.has(serviceError.code)) {
      const cause = serviceError.cause instanceof Error ? serviceError.cause : serviceError;
      logger.error(`request failed: ${cause.message}`, { requestId: res.locals.requestId, path: req.originalUrl.split('?', 1)[0], stack: cause.stack });
    }
    if (res.headersSent) {
      res.end();
      return;
    }
    res.status(serviceError.status).set(serviceError.headers).json(errorBody(serviceError));
  };
}

/** Unknown routes: 404 in the OpenAI error shape. */
export const notFoundHandler: RequestHandler = (req, _res, next) => {
  next(new ServiceError('NOT_FOUND', `Unknown route: ${req.method} ${req.path}`));
};
