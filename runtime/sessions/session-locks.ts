import { ServiceError } from '../service-error.js';

/** Releases a held session lock. */
export type Release = () => void;

/**
 * One turn at a time per session inside this process: a request for a busy session waits
 * its turn, in arrival order, for at most `waitMs`, then gets a SESSION_BUSY error.
 */
export class SessionLocks {
  private readonly tails = new Map<string, Promise<void>>();

  async acquire(sessionId: string, waitMs: number, signal?: AbortSignal): Promise<Release> {
    const previous = this.tails.get(sessionId) ?? Promise.resolve();
    let release!: Release;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => held);
    this.tails.set(sessionId, tail);
    void tail.then(() => {
      if (this.tails.get(sessionId) === tail) this.tails.delete(sessionId);
    });
    try {
      await waitFor(previous, waitMs, signal, sessionId);
    } catch (error) {
      // Give up our place without blocking those queued behind us.
      void previous.then(release);
      throw error;
    }
    return releaseOnce(release);
  }
}

function waitFor(previous: Promise<void>, waitMs: number, signal: AbortSignal | undefined, sessionId: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new ServiceError('SESSION_BUSY', `session ${sessionId} is busy with another turn; try again`, { headers: { 'Retry-After': '1' } }));
    }, waitMs);
    const onAbort = () => {
      cleanup();
      reject(new ServiceError('INVALID_REQUEST', 'the request was cancelled while waiting for its session'));
    };
    const cleanup = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    void previous.then(() => {
      cleanup();
      resolve();
    });
  });
}

/** `release` that does something the first time it is called only. */
export function releaseOnce(release: Release): Release {
  let released = false;
  return () => {
    if (released) return;
    released = true;
    release();
  };
}
