import type { AppConfig } from '../../config/load-config.js';

/** The `limits` settings: requests per minute (0: off), burst, requests in flight (0: off). */
export type UsageLimitSettings = AppConfig['limits'];

/** Which limit refused a request, named as its setting. */
export type LimitName = 'requests_per_minute' | 'concurrent_requests';

/** The ledger's answer to one request: admitted (and counted), or refused with a wait in whole seconds. */
export type Admission = { admitted: true } | { admitted: false; limit: LimitName; retryAfterSeconds: number };

type UserUsage = { tokens: number; refilledAt: number; inFlight: number };

/** How often users at rest are forgotten; a user at rest is indistinguishable from one never seen. */
const SWEEP_INTERVAL_MS = 60_000;
/** A refusal for too many requests in flight cannot know when one ends: the client is told to retry in a second. */
const IN_FLIGHT_RETRY_SECONDS = 1;

/**
 * Counts each user's chat requests: a token bucket for the rate and a count of requests in
 * flight. The bucket holds `burst` tokens (1 when burst is 0), starts full and refills at
 * requests_per_minute / 60 tokens a second; a request takes one token. A user whose bucket
 * is full again and who has nothing in flight is at rest and is dropped, so memory follows
 * the users active in the last minute or so, not every user ever seen.
 */
export class UsageLedger {
  private readonly users = new Map<string, UserUsage>();
  private readonly capacity: number;
  private readonly tokensPerMs: number;
  private sweptAt: number;

  constructor(
    private readonly settings: UsageLimitSettings,
    private readonly now: () => number = Date.now,
  ) {
    this.capacity = Math.max(settings.burst, 1);
    this.tokensPerMs = settings.requests_per_minute / 60_000;
    this.sweptAt = now();
  }

  /** Whether any limit is on. */
  get isLimiting(): boolean {
    return this.settings.requests_per_minute > 0 || this.settings.concurrent_requests > 0;
  }

  /** How many users the ledger remembers. */
  get trackedUsers(): number {
    return this.users.size;
  }

  /** Admits one request of `userId` (taking a token and a place in flight) or says which limit refuses it. */
  admit(userId: string): Admission {
    if (!this.isLimiting) return { admitted: true };
    const now = this.now();
    this.sweep(now);
    const usage = this.usageOf(userId, now);
    const maxInFlight = this.settings.concurrent_requests;
    // The in-flight check comes first: a request refused for it must not cost a token.
    if (maxInFlight > 0 && usage.inFlight >= maxInFlight) {
      return { admitted: false, limit: 'concurrent_requests', retryAfterSeconds: IN_FLIGHT_RETRY_SECONDS };
    }
    if (this.tokensPerMs > 0) {
      if (usage.tokens < 1) {
        const waitMs = Math.round((1 - usage.tokens) / this.tokensPerMs);
        return { admitted: false, limit: 'requests_per_minute', retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)) };
      }
      usage.tokens -= 1;
    }
    usage.inFlight += 1;
    return { admitted: true };
  }

  /** Ends one admitted request of `userId`; the caller makes sure each admission is released once. */
  release(userId: string): void {
    const usage = this.users.get(userId);
    if (!usage) return;
    usage.inFlight = Math.max(0, usage.inFlight - 1);
    if (this.isAtRest(usage, this.now())) this.users.delete(userId);
  }

  private usageOf(userId: string, now: number): UserUsage {
    let usage = this.users.get(userId);
    if (!usage) {
      usage = { tokens: this.capacity, refilledAt: now, inFlight: 0 };
      this.users.set(userId, usage);
    }
    this.refill(usage, now);
    return usage;
  }

  private refill(usage: UserUsage, now: number): void {
    const elapsed = Math.max(0, now - usage.refilledAt);
    usage.tokens = Math.min(this.capacity, usage.tokens + elapsed * this.tokensPerMs);
    usage.refilledAt = now;
  }

  private isAtRest(usage: UserUsage, now: number): boolean {
    if (usage.inFlight > 0) return false;
    if (this.tokensPerMs === 0) return true;
    this.refill(usage, now);
    return usage.tokens >= this.capacity;
  }

  private sweep(now: number): void {
    if (now - this.sweptAt < SWEEP_INTERVAL_MS) return;
    this.sweptAt = now;
    for (const [userId, usage] of this.users) {
      if (this.isAtRest(usage, now)) this.users.delete(userId);
    }
  }
}
