import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { IdempotencyKeyClaim, IdempotencyKeyStore, RecordedAnswer } from '../ports.js';

/** How often a request waits for the answer of a key another process runs, in ms. */
const POLL_MS = 100;

/** How often the expired keys are deleted, in ms. */
const SWEEP_MS = 10 * 60_000;

/** The head of an answer: its status and the headers a repeat gets. */
export type AnswerHead = Pick<RecordedAnswer, 'status' | 'headers'>;

/**
 * The answer of a key this process runs, as it is written: its head, its pieces so far, and
 * its end. A request with the same key joins it from the start (`join`).
 */
export class LiveAnswer {
  private head: AnswerHead | undefined;
  private readonly pieces: string[] = [];
  private ended: RecordedAnswer | undefined;
  private readonly events = new EventEmitter();

  constructor(readonly requestHash: string) {
    this.events.setMaxListeners(0);
  }

  /** The status and headers, once they are known (before the first piece). */
  start(head: AnswerHead): void {
    if (this.head) return;
    this.head = head;
    this.events.emit('head', head);
  }

  write(piece: string): void {
    if (piece === '') return;
    this.pieces.push(piece);
    this.events.emit('piece', piece);
  }

  /** The whole answer; `start` with its head if nothing came before. */
  end(head: AnswerHead): RecordedAnswer {
    this.start(head);
    this.ended ??= { ...this.head!, body: this.pieces.join('') };
    this.events.emit('end', this.ended);
    return this.ended;
  }

  /**
   * Follows the answer from its start: `onHead`, every piece written so far and then each one
   * as it comes, until its end (or `signal`). Resolves at the end.
   */
  async join(to: { onHead(head: AnswerHead): void; onPiece(piece: string): void }, signal: AbortSignal): Promise<void> {
    if (this.head) to.onHead(this.head);
    for (const piece of this.pieces) to.onPiece(piece);
    if (this.ended || signal.aborted) return;
    await new Promise<void>((resolve) => {
      const onHead = (head: AnswerHead) => to.onHead(head);
      const onPiece = (piece: string) => to.onPiece(piece);
      const done = () => {
        this.events.off('head', onHead).off('piece', onPiece).off('end', done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      this.events.on('head', onHead).on('piece', onPiece).once('end', done);
      signal.addEventListener('abort', done, { once: true });
    });
  }
}

/** What a request with an idempotency key does. */
export type KeyDecision =
  /**
   * It runs, and its answer is written to `answer` and recorded by `finish`. `retried`: an
   * earlier request with the key ran and never ended (its process died): this is its retry.
   */
  | { kind: 'run'; answer: LiveAnswer; finish: (head: AnswerHead, keep: boolean) => Promise<void>; retried: boolean }
  /** It gets the answer of the key's first request, which this process is running. */
  | { kind: 'join'; answer: LiveAnswer }
  /** It gets the recorded answer of the key's first request. */
  | { kind: 'repeat'; answer: RecordedAnswer }
  /** The key was first used with another request. */
  | { kind: 'reused' }
  /** The client went away while the key's first request ran elsewhere. */
  | { kind: 'gone' };

/** The settings of idempotency keys. */
export type IdempotencyKeySettings = {
  /** How long a key and its answer are kept. */
  ttlMs: number;
  /** A key whose holder stops renewing it this long is taken over by the next request with it. */
  leaseMs: number;
};

/**
 * Idempotency keys across processes: the first request with a key runs, and every other
 * request with it, from any process, gets that request's answer: joined from its start while
 * it runs here, waited for while it runs elsewhere, repeated once recorded. A key whose
 * process died while it ran is taken over by the next request with it.
 */
export class IdempotencyKeys {
  private readonly live = new Map<string, LiveAnswer>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly store: IdempotencyKeyStore,
    private readonly holder: string,
    private readonly settings: IdempotencyKeySettings,
    private readonly onError: (what: string, error: unknown) => void,
  ) {
    this.sweeper = setInterval(() => {
      store.deleteExpired().catch((error: unknown) => onError('delete expired idempotency keys', error));
    }, SWEEP_MS).unref();
  }

  /** What the request `claim` describes does; waits while the key's first request runs in another process. */
  async decide(claim: IdempotencyKeyClaim, signal: AbortSignal): Promise<KeyDecision> {
    const id = liveId(claim);
    for (;;) {
      const here = this.live.get(id);
      if (here) return here.requestHash === claim.requestHash ? { kind: 'join', answer: here } : { kind: 'reused' };
      const claimed = await this.store.claim(claim, this.holder, this.settings.leaseMs, this.settings.ttlMs);
      if (claimed) return this.run(claim, claimed.takenOver === true);
      const record = await this.store.get(claim.userId, claim.key);
      // Deleted or expired since the claim was refused: claim it again.
      if (!record) continue;
      if (record.requestHash !== claim.requestHash) return { kind: 'reused' };
      if (record.answer) return { kind: 'repeat', answer: record.answer };
      try {
        await sleep(POLL_MS, undefined, { signal });
      } catch {
        return { kind: 'gone' };
      }
    }
  }

  /** Stops deleting expired keys. */
  stop(): void {
    clearInterval(this.sweeper);
  }

  private run(claim: IdempotencyKeyClaim, retried: boolean): KeyDecision {
    const id = liveId(claim);
    const answer = new LiveAnswer(claim.requestHash);
    this.live.set(id, answer);
    const { userId, key } = claim;
    const renewal = setInterval(() => {
      this.store.renew(userId, key, this.holder, this.settings.leaseMs).catch((error: unknown) => this.onError('renew an idempotency key', error));
    }, Math.max(50, Math.floor(this.settings.leaseMs / 3)));
    renewal.unref();
    const finish = async (head: AnswerHead, keep: boolean) => {
      clearInterval(renewal);
      const recorded = answer.end(head);
      try {
        if (keep) await this.store.finish(userId, key, this.holder, recorded);
        else await this.store.release(userId, key, this.holder);
      } catch (error) {
        // The key stays running until its lease lapses; the next request with it then runs afresh.
        this.onError('record the answer of an idempotency key', error);
      } finally {
        this.live.delete(id);
      }
    };
    return { kind: 'run', answer, finish, retried };
  }
}

function liveId(claim: Pick<IdempotencyKeyClaim, 'userId' | 'key'>): string {
  return `${claim.userId}\u0000${claim.key}`;
}
