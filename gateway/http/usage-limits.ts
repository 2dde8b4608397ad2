import { randomUUID } from 'node:crypto';
import type { Worker } from 'node:cluster';
import { ServiceError } from '../../runtime/service-error.js';
import { callPrimary, isClusterWorker, notifyPrimary, type RpcHandler } from '../server/cluster-rpc.js';
import { UsageLedger, type Admission, type UsageLimitSettings } from '../../runtime/usage/usage-ledger.js';
import type { TokenBudgets } from '../../runtime/usage/token-budgets.js';

/** Ends an admitted request: frees its place in flight. Calling it again does nothing. */
export type Release = () => void;

/** Per-user admission of chat requests (`limits.*`, and the token budgets `budgets.*`). */
export type UsageLimiter = {
  /**
   * Admits one request of `userId`, or throws RATE_LIMITED (429 with Retry-After) naming the
   * limit it hit, or INSUFFICIENT_QUOTA (429) naming the token budget it has used up.
   */
  admit(userId: string): Promise<Release>;
};

const ADMIT_METHOD = 'limits.admit';
const RELEASE_METHOD = 'limits.release';
/** The primary answers in well under a millisecond; one that takes a second is stuck. */
const PRIMARY_TIMEOUT_MS = 1_000;

/** Where the fail-open warning goes (the service's logger). */
type WarningLog = { warn(message: string): void };
type Refusal = Extract<Admission, { admitted: false }>;
type AdmitPayload = { userId: string; permit: string };

/**
 * The limiter for this process: in a cluster worker it asks the primary, so the limits hold
 * per instance however many workers there are; otherwise it counts in process.
 */
export function createUsageLimiter(settings: UsageLimitSettings, logger: WarningLog, budgets?: Pick<TokenBudgets, 'admit'>): UsageLimiter {
  const isLimiting = settings.requests_per_minute > 0 || settings.concurrent_requests > 0;
  const limiter = isLimiting && isClusterWorker() ? createPrimaryLimiter(settings, logger) : createLocalLimiter(settings);
  return budgets ? withBudgets(limiter, budgets) : limiter;
}

/**
 * The limiter with the token budgets checked first: a request refused for its budget takes no
 * place under the rate limits. The budgets are counted in the database, which every worker
 * and instance shares, so each process checks them itself.
 */
export function withBudgets(limiter: UsageLimiter, budgets: Pick<TokenBudgets, 'admit'>): UsageLimiter {
  return {
    async admit(userId) {
      await budgets.admit(userId);
      return limiter.admit(userId);
    },
  };
}

/** Counts in this process: the limiter of a single-process service. */
export function createLocalLimiter(settings: UsageLimitSettings, now?: () => number): UsageLimiter {
  const ledger = new UsageLedger(settings, now);
  return {
    async admit(userId) {
      const admission = ledger.admit(userId);
      if (!admission.admitted) throw limitError(admission, settings);
      return once(() => ledger.release(userId));
    },
  };
}

/**
 * A worker's limiter: the primary (`limitHandlers`) counts. It fails open: when the primary
 * does not answer within a second, the request goes through unlimited and a warning is
 * logged, since refusing every request because the counter is stuck would be worse than a
 * moment without limits. The permit id is chosen here, so the release also frees a permit
 * the primary granted after the worker stopped waiting (IPC keeps the order of messages).
 */
function createPrimaryLimiter(settings: UsageLimitSettings, logger: WarningLog): UsageLimiter {
  return {
    async admit(userId) {
      const permit = randomUUID();
      const release = once(() => notifyPrimary(RELEASE_METHOD, { permit }));
      let admission: Admission;
      try {
        admission = await callPrimary<Admission>(ADMIT_METHOD, { userId, permit } satisfies AdmitPayload, PRIMARY_TIMEOUT_MS);
      } catch (error) {
        logger.warn(`usage limits not applied to a request: ${(error as Error).message}`);
        return release;
      }
      if (!admission.admitted) throw limitError(admission, settings);
      return release;
    },
  };
}

/**
 * The primary's side of the workers' limiters, for `servePrimary`: one ledger for the
 * instance. Each admitted request holds a permit until its worker releases it; the permits
 * of a worker that exits are dropped with it.
 */
export function limitHandlers(settings: UsageLimitSettings): Record<string, RpcHandler> {
  const ledger = new UsageLedger(settings);
  const permits = new Map<string, { userId: string; workerId: number }>();
  const watched = new Set<number>();
  const release = (permit: string) => {
    const held = permits.get(permit);
    if (!held) return;
    permits.delete(permit);
    ledger.release(held.userId);
  };
  const watch = (worker: Worker) => {
    if (watched.has(worker.id)) return;
    watched.add(worker.id);
    worker.once('exit', () => {
      watched.delete(worker.id);
      for (const [permit, held] of permits) if (held.workerId === worker.id) release(permit);
    });
  };
  return {
    [ADMIT_METHOD]: (payload, worker) => {
      const { userId, permit } = payload as Partial<AdmitPayload>;
      if (typeof userId !== 'string' || typeof permit !== 'string') throw new Error(`${ADMIT_METHOD} needs a userId and a permit`);
      watch(worker);
      const admission = ledger.admit(userId);
      if (admission.admitted) permits.set(permit, { userId, workerId: worker.id });
      return admission;
    },
    [RELEASE_METHOD]: (payload) => {
      const { permit } = payload as Partial<AdmitPayload>;
      if (typeof permit === 'string') release(permit);
    },
  };
}

function limitError(refusal: Refusal, settings: UsageLimitSettings): ServiceError {
  const seconds = refusal.retryAfterSeconds;
  const message =
    refusal.limit === 'concurrent_requests'
      ? `Too many requests in flight: a user may have at most ${settings.concurrent_requests} chat requests running at once (limits.concurrent_requests). Retry when one has finished.`
      : `Rate limit reached: a user may start ${settings.requests_per_minute} chat requests per minute, in bursts of up to ${Math.max(settings.burst, 1)} (limits.requests_per_minute). Retry after ${seconds} s.`;
  return new ServiceError('RATE_LIMITED', message, { headers: { 'Retry-After': String(seconds) } });
}

function once(action: () => void): Release {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    action();
  };
}
