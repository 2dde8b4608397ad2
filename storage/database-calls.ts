import { databaseUnavailable } from '../runtime/service-error.js';

/**
 * The network's codes of a connection that cannot be made or was lost, and PostgreSQL's
 * SQLSTATEs of the same: connection exceptions (class 08), insufficient resources (class 53:
 * a full disk, too many connections), a server shutting down or starting (57P01 to 57P03),
 * and an I/O error of the server (58030).
 */
const UNREACHABLE_CODE = /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|08\w{3}|53\w{3}|57P0[123]|58030)$/;

/** What the pg driver and its pool say when a connection is lost or cannot be had, and PGlite when it was closed. */
const UNREACHABLE_TEXT = /Connection terminated|timeout exceeded when trying to connect|is not queryable|PGlite is closed|Connection refused/i;

/** Whether an error says the database cannot be reached now (the error, or what caused it). */
export function isDatabaseUnreachable(error: unknown): boolean {
  for (let at = error, depth = 0; at !== null && typeof at === 'object' && depth < 4; at = (at as { cause?: unknown }).cause, depth++) {
    const { code, message } = at as { code?: unknown; message?: unknown };
    if (typeof code === 'string' && UNREACHABLE_CODE.test(code)) return true;
    if (typeof message === 'string' && UNREACHABLE_TEXT.test(message)) return true;
  }
  return false;
}

/**
 * A database call as a route answers its failure: DATABASE_UNAVAILABLE, a 503 with
 * Retry-After, as chat completions answers, when the database cannot be reached
 * (`databaseUnavailable`, the original error its cause). Every other failure (the database's
 * refusal of the data or the statement, the service's own errors, a fault of the code) stays
 * as it is.
 */
export function databaseCall<T>(call: Promise<T>): Promise<T> {
  return call.catch((error: unknown) => {
    throw isDatabaseUnreachable(error) ? databaseUnavailable(error) : error;
  });
}

/**
 * A store (an object of functions, as the repositories make them) each of whose asynchronous
 * calls is a `databaseCall`: every repository answers an unreachable database alike, so every
 * route does (503 with Retry-After), whichever store it reads.
 */
export function databaseCalls<Store extends object>(store: Store): Store {
  const calls: Record<string, unknown> = {};
  for (const [name, member] of Object.entries(store)) {
    if (typeof member !== 'function') {
      calls[name] = member;
      continue;
    }
    calls[name] = (...args: unknown[]) => {
      const result: unknown = (member as (...args: unknown[]) => unknown).apply(store, args);
      return result instanceof Promise ? databaseCall(result) : result;
    };
  }
  return calls as Store;
}
