/** Error codes the service raises on purpose; each maps to one HTTP status. */
export const ERROR_STATUS = {
  INVALID_REQUEST: 400,
  INVALID_JSON: 400,
  CONTEXT_LENGTH_EXCEEDED: 400,
  UNAUTHORIZED: 401,
  INVALID_API_KEY: 401,
  MISSING_API_KEY: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  GONE: 410,
  SESSION_CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  IDEMPOTENCY_KEY_REUSED: 422,
  RATE_LIMITED: 429,
  INSUFFICIENT_QUOTA: 429,
  TOOL_AUTH_REQUIRED: 401,
  NOT_IMPLEMENTED: 501,
  SESSION_BUSY: 503,
  UPSTREAM_UNAVAILABLE: 502,
  DATABASE_UNAVAILABLE: 503,
  MEMORY_UNAVAILABLE: 503,
  INTERNAL: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** OpenAI error `type` for each code. */
const ERROR_TYPE: Record<ErrorCode, string> = {
  INVALID_REQUEST: 'invalid_request_error',
  INVALID_JSON: 'invalid_request_error',
  CONTEXT_LENGTH_EXCEEDED: 'invalid_request_error',
  UNAUTHORIZED: 'authentication_error',
  INVALID_API_KEY: 'authentication_error',
  MISSING_API_KEY: 'authentication_error',
  FORBIDDEN: 'permission_error',
  NOT_FOUND: 'not_found_error',
  GONE: 'invalid_request_error',
  SESSION_CONFLICT: 'invalid_request_error',
  PAYLOAD_TOO_LARGE: 'invalid_request_error',
  IDEMPOTENCY_KEY_REUSED: 'invalid_request_error',
  RATE_LIMITED: 'rate_limit_error',
  // OpenAI's own answer to an account past its quota: 429, type and code `insufficient_quota`.
  INSUFFICIENT_QUOTA: 'insufficient_quota',
  TOOL_AUTH_REQUIRED: 'tool_auth_required',
  NOT_IMPLEMENTED: 'not_implemented_error',
  SESSION_BUSY: 'server_busy_error',
  UPSTREAM_UNAVAILABLE: 'upstream_error',
  DATABASE_UNAVAILABLE: 'server_busy_error',
  MEMORY_UNAVAILABLE: 'server_error',
  INTERNAL: 'server_error',
};

export type ServiceErrorOptions = {
  param?: string | null;
  cause?: unknown;
  /** Extra fields placed in the OpenAI error object beside message/type/param/code. */
  details?: Record<string, unknown>;
  /** Response headers the gateway adds (e.g. Retry-After). */
  headers?: Record<string, string>;
};

/** The one error class for what the service throws on purpose. */
export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly type: string;
  readonly param: string | null;
  readonly details: Record<string, unknown>;
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message: string, options: ServiceErrorOptions = {}) {
    super(message, { cause: options.cause });
    this.name = 'ServiceError';
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.type = ERROR_TYPE[code];
    this.param = options.param ?? null;
    this.details = options.details ?? {};
    this.headers = options.headers ?? {};
  }
}

/** True when `error` is a ServiceError. */
export function isServiceError(error: unknown): error is ServiceError {
  return error instanceof ServiceError;
}

/** The database cannot be reached: a 503 the client may retry after a second. */
export function databaseUnavailable(cause?: unknown): ServiceError {
  return new ServiceError('DATABASE_UNAVAILABLE', 'the database is unavailable; try again shortly', { cause, headers: { 'Retry-After': '1' } });
}
