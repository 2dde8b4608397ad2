import { createHash } from 'node:crypto';
import type { Request, Response } from 'express';
import type { AnswerHead, IdempotencyKeys, LiveAnswer } from '../../runtime/idempotency/idempotency-keys.js';
import type { RecordedAnswer } from '../../runtime/ports.js';
import { ServiceError } from '../../runtime/service-error.js';

/** The request header, as Stripe and the OpenAI SDKs' `idempotencyKey` option name it. */
const KEY_HEADER = 'idempotency-key';

/** Longest key: the column is varchar(255). */
const MAX_KEY_LENGTH = 255;

/** A key is printable ASCII without a space at either end, as header values travel safely. */
const KEY_PATTERN = /^[!-~](?:[ -~]*[!-~])?$/;

/** The headers of an answer a repeat gets; the others (the request id, the date) are the repeat's own. */
const REPEATED_HEADERS = ['content-type', 'x-session-id', 'retry-after', 'x-ignored-tools', 'cache-control'];

/** Set on an answer that repeats (or joins) the first request's, as Stripe sets it. */
const REPLAYED_HEADER = 'Idempotent-Replayed';

/**
 * Statuses that are not kept under a key: the request did not get to run (too many requests, a
 * busy session) or failed on the service's side, so the next request with the key runs afresh.
 */
function isKept(status: number): boolean {
  return status < 500 && status !== 409 && status !== 429;
}

/** What a request with an `Idempotency-Key` needs: the keys, the acting user, and the endpoint the key is used on. */
export type KeyedRequest = { keys: IdempotencyKeys; userId: string; endpoint: string };

/**
 * Answers a request by its `Idempotency-Key` when another request with the key came first: with
 * that request's answer (joined from its start while it runs, waited for while it runs in
 * another process, repeated once it ended), or 422 when it had another body or endpoint. True
 * when the request was answered. A request without a key, or the first with its key, is left
 * to the route (false); the first is recorded as it is answered, and its turn outlives its
 * client (`answerRecorded`) so that a retry gets the whole answer.
 */
export async function answeredByKey(req: Request, res: Response, keyed: KeyedRequest): Promise<boolean> {
  const key = req.get(KEY_HEADER);
  if (key === undefined) return false;
  checkKey(key);
  const requestHash = createHash('sha256').update(`${keyed.endpoint}\n${JSON.stringify(req.body)}`).digest('hex');
  const gone = new AbortController();
  // Only a client that left early aborts the wait (an abort makes an error object: not for every request).
  res.on('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  const decision = await keyed.keys.decide({ userId: keyed.userId, key, requestHash }, gone.signal);
  switch (decision.kind) {
    case 'reused':
      throw new ServiceError('IDEMPOTENCY_KEY_REUSED', `the Idempotency-Key '${key}' was first used with another request; use a new key for a new request`, {
        param: 'Idempotency-Key',
      });
    case 'repeat':
      repeat(res, decision.answer);
      return true;
    case 'join':
      await join(res, decision.answer, gone.signal);
      return true;
    case 'gone':
      return true;
    case 'run':
      // A key whose first request never ended is this request's earlier attempt.
      if (decision.retried) res.locals.retriesKey = true;
      record(res, decision.answer, decision.finish);
      return false;
  }
}

/**
 * Resolves when the answer of the first request of an idempotency key has been recorded;
 * undefined for other requests. Such a request's turn outlives its client.
 */
export function answerRecorded(res: Response): Promise<void> | undefined {
  return res.locals.answerRecorded as Promise<void> | undefined;
}

function checkKey(key: string): void {
  if (key.length === 0 || key.length > MAX_KEY_LENGTH || !KEY_PATTERN.test(key)) {
    throw new ServiceError('INVALID_REQUEST', `Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} printable ASCII characters, without a space at either end`, {
      param: 'Idempotency-Key',
    });
  }
}

/**
 * Records what the route writes to `res` into `answer`, and stores it when it ends. Once the
 * client has gone, the writes are recorded only: the answer is for the request's retries.
 */
function record(res: Response, answer: LiveAnswer, finish: (head: AnswerHead, keep: boolean) => Promise<void>): void {
  const headOf = (): AnswerHead => ({ status: res.statusCode, headers: repeatedHeaders(res) });
  const write = res.write.bind(res) as (...args: unknown[]) => boolean;
  const end = res.end.bind(res) as (...args: unknown[]) => Response;
  const flushHeaders = res.flushHeaders.bind(res);
  let ended!: () => void;
  // Once the client has gone, nothing more is sent: the writes are recorded only.
  let gone = false;
  res.on('close', () => {
    gone = true;
  });
  res.locals.answerRecorded = new Promise<void>((resolve) => {
    ended = resolve;
  });
  res.flushHeaders = () => {
    answer.start(headOf());
    if (!gone) flushHeaders();
  };
  res.write = ((chunk: unknown, ...rest: unknown[]) => {
    answer.start(headOf());
    answer.write(textOf(chunk));
    return gone ? true : write(chunk, ...rest);
  }) as Response['write'];
  res.end = ((chunk?: unknown, ...rest: unknown[]) => {
    const head = headOf();
    if (chunk !== undefined && typeof chunk !== 'function') {
      answer.start(head);
      answer.write(textOf(chunk));
    }
    void finish(head, isKept(head.status)).finally(ended);
    if (!gone) return end(chunk, ...rest);
    return res;
  }) as Response['end'];
}

/** The recorded answer, as it was first sent, marked as a repeat. */
function repeat(res: Response, answer: RecordedAnswer): void {
  res.status(answer.status).set(answer.headers).set(REPLAYED_HEADER, 'true');
  res.end(answer.body);
}

/** The answer of the key's first request, from its start, as it is written. */
async function join(res: Response, answer: LiveAnswer, signal: AbortSignal): Promise<void> {
  let started = false;
  const start = (head: AnswerHead) => {
    if (started) return;
    started = true;
    res.status(head.status).set(head.headers).set(REPLAYED_HEADER, 'true');
    res.flushHeaders();
  };
  await answer.join({ onHead: start, onPiece: (piece) => res.write(piece) }, signal);
  if (!signal.aborted) res.end();
}

function repeatedHeaders(res: Response): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of REPEATED_HEADERS) {
    const value = res.getHeader(name);
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return headers;
}

function textOf(chunk: unknown): string {
  if (typeof chunk === 'string') return chunk;
  if (chunk instanceof Uint8Array) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8');
  return '';
}
