import type { Dispatcher } from 'undici';
import { isBrokenBeforeAnswer } from './upstream-errors.js';

/** How a call is sent again: at most `maxRetries` more times, waiting while `signal` allows. */
export type RetryOptions = { maxRetries: number; signal: AbortSignal };

/** Statuses of a server too busy to take the call now: vLLM's and Ollama's queues full, a proxy's 503. */
const BUSY = new Set([429, 503]);

/** The longest wait the service makes for a busy server; a longer `Retry-After` is answered as it is. */
const MAX_WAIT_MS = 10_000;

/**
 * Sends a call, and again when it could not be taken: a server that says when to come back
 * (429 or 503 with a `Retry-After` of at most ten seconds, waited out), or a request lost on a
 * kept-alive connection the server had just closed (no answer began, so the model never saw
 * it). A busy answer without `Retry-After` says nothing of when the server will take calls
 * again: it is the caller's, as are other failures and answers. The answer's body is the
 * caller's to read.
 */
export async function sendWithRetries(send: () => Promise<Dispatcher.ResponseData>, options: RetryOptions): Promise<Dispatcher.ResponseData> {
  for (let attempt = 0; ; attempt++) {
    const canRetry = attempt < options.maxRetries;
    let response: Dispatcher.ResponseData;
    try {
      response = await send();
    } catch (error) {
      if (canRetry && !options.signal.aborted && isBrokenBeforeAnswer(error)) continue;
      throw error;
    }
    if (!canRetry || !BUSY.has(response.statusCode)) return response;
    const waitMs = retryAfterMs(response.headers['retry-after']);
    if (waitMs === undefined || waitMs > MAX_WAIT_MS) return response;
    await response.body.dump();
    await sleep(waitMs, options.signal);
  }
}

/** `Retry-After` in ms: seconds, or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(header: string | string[] | undefined, now = Date.now()): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || value.trim() === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Math.round(Number(value) * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
