import { EventEmitter } from 'node:events';
import type { Worker } from 'node:cluster';
import { expect } from 'chai';
import { UsageLedger, type UsageLimitSettings } from '../../runtime/usage/usage-ledger.js';
import { createLocalLimiter, limitHandlers } from '../../gateway/http/usage-limits.js';
import { ServiceError } from '../../runtime/service-error.js';
import { rejection } from '../support/rejection.js';

/** A clock the test moves by hand. */
function manualClock(start = 1_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

function settings(patch: Partial<UsageLimitSettings>): UsageLimitSettings {
  return { requests_per_minute: 0, burst: 0, concurrent_requests: 0, ...patch };
}

/** Admits `count` requests of `userId` and returns how many were admitted. */
function admitMany(ledger: UsageLedger, userId: string, count: number): number {
  return Array.from({ length: count }, () => ledger.admit(userId)).filter((admission) => admission.admitted).length;
}

describe('UsageLedger', () => {
  describe('requests per minute', () => {
    it('admits a burst of `burst` requests at once, then refuses', () => {
      const ledger = new UsageLedger(settings({ requests_per_minute: 60, burst: 5 }), manualClock().now);
      expect(admitMany(ledger, 'ann', 5)).to.equal(5);
      expect(ledger.admit('ann')).to.deep.equal({ admitted: false, limit: 'requests_per_minute', retryAfterSeconds: 1 });
    });

    it('holds one token when burst is 0', () => {
      const ledger = new UsageLedger(settings({ requests_per_minute: 60, burst: 0 }), manualClock().now);
      expect(admitMany(ledger, 'ann', 3)).to.equal(1);
    });

    it('refills at requests_per_minute / 60 tokens a second', () => {
      const clock = manualClock();
      const ledger = new UsageLedger(settings({ requests_per_minute: 120, burst: 2 }), clock.now);
      admitMany(ledger, 'ann', 2);
      clock.advance(499);
      expect(ledger.admit('ann').admitted).to.equal(false);
      clock.advance(1);
      expect(ledger.admit('ann').admitted).to.equal(true);
      clock.advance(60_000);
      expect(admitMany(ledger, 'ann', 3)).to.equal(2);
    });

    it('says how long until the next token, in whole seconds rounded up', () => {
      const clock = manualClock();
      const ledger = new UsageLedger(settings({ requests_per_minute: 1, burst: 1 }), clock.now);
      ledger.admit('ann');
      expect(ledger.admit('ann')).to.include({ retryAfterSeconds: 60 });
      clock.advance(58_500);
      expect(ledger.admit('ann')).to.include({ retryAfterSeconds: 2 });
    });

    it('keeps a bucket per user', () => {
      const ledger = new UsageLedger(settings({ requests_per_minute: 60, burst: 1 }), manualClock().now);
      expect(ledger.admit('ann').admitted).to.equal(true);
      expect(ledger.admit('ann').admitted).to.equal(false);
      expect(ledger.admit('bob').admitted).to.equal(true);
    });
  });

  describe('requests in flight', () => {
    it('refuses past concurrent_requests until one is released', () => {
      const ledger = new UsageLedger(settings({ concurrent_requests: 2 }), manualClock().now);
      expect(admitMany(ledger, 'ann', 2)).to.equal(2);
      expect(ledger.admit('ann')).to.deep.equal({ admitted: false, limit: 'concurrent_requests', retryAfterSeconds: 1 });
      ledger.release('ann');
      expect(ledger.admit('ann').admitted).to.equal(true);
    });

    it('does not take a token for a request refused as too many in flight', () => {
      const ledger = new UsageLedger(settings({ requests_per_minute: 60, burst: 2, concurrent_requests: 1 }), manualClock().now);
      ledger.admit('ann');
      expect(ledger.admit('ann')).to.include({ limit: 'concurrent_requests' });
      ledger.release('ann');
      expect(ledger.admit('ann').admitted).to.equal(true);
    });
  });

  describe('memory', () => {
    it('forgets a user whose last request ended when only the in-flight limit is on', () => {
      const ledger = new UsageLedger(settings({ concurrent_requests: 2 }), manualClock().now);
      ledger.admit('ann');
      expect(ledger.trackedUsers).to.equal(1);
      ledger.release('ann');
      expect(ledger.trackedUsers).to.equal(0);
    });

    it('prunes users whose bucket is full again and who have nothing in flight', () => {
      const clock = manualClock();
      const ledger = new UsageLedger(settings({ requests_per_minute: 60, burst: 10, concurrent_requests: 4 }), clock.now);
      for (let user = 0; user < 100; user += 1) {
        ledger.admit(`user-${user}`);
        ledger.release(`user-${user}`);
      }
      ledger.admit('busy');
      expect(ledger.trackedUsers).to.equal(101);
      clock.advance(60_000);
      ledger.admit('late');
      expect(ledger.trackedUsers).to.equal(2);
    });

    it('remembers nothing when every limit is off', () => {
      const ledger = new UsageLedger(settings({}), manualClock().now);
      expect(admitMany(ledger, 'ann', 1000)).to.equal(1000);
      expect(ledger.trackedUsers).to.equal(0);
    });
  });
});

describe('createLocalLimiter', () => {
  it('refuses with a 429 rate_limit_error, a Retry-After header and the limit named', async () => {
    const limiter = createLocalLimiter(settings({ requests_per_minute: 6, burst: 1 }), manualClock().now);
    await limiter.admit('ann');
    const error = await rejection(limiter.admit('ann'));
    expect(error).to.be.instanceOf(ServiceError);
    const refusal = error as ServiceError;
    expect(refusal.status).to.equal(429);
    expect(refusal.type).to.equal('rate_limit_error');
    expect(refusal.headers).to.deep.equal({ 'Retry-After': '10' });
    expect(refusal.message).to.include('limits.requests_per_minute');
  });

  it('names the in-flight limit when that one refuses', async () => {
    const limiter = createLocalLimiter(settings({ concurrent_requests: 1 }), manualClock().now);
    await limiter.admit('ann');
    const error = (await rejection(limiter.admit('ann'))) as ServiceError;
    expect(error.message).to.include('limits.concurrent_requests');
    expect(error.headers['Retry-After']).to.equal('1');
  });

  it('frees one place in flight however often a release is called', async () => {
    const limiter = createLocalLimiter(settings({ concurrent_requests: 2 }), manualClock().now);
    const release = await limiter.admit('ann');
    await limiter.admit('ann');
    release();
    release();
    await limiter.admit('ann');
    expect(await rejection(limiter.admit('ann'))).to.be.instanceOf(ServiceError);
  });
});

describe('limitHandlers', () => {
  /** A stand-in for a cluster worker: an id and an exit event. */
  function fakeWorker(id: number): Worker {
    return Object.assign(new EventEmitter(), { id }) as unknown as Worker;
  }

  function handlersFor(patch: Partial<UsageLimitSettings>) {
    const handlers = limitHandlers(settings(patch));
    return {
      admit: (worker: Worker, userId: string, permit: string) => handlers['limits.admit']!({ userId, permit }, worker) as { admitted: boolean },
      release: (worker: Worker, permit: string) => handlers['limits.release']!({ permit }, worker),
    };
  }

  it('counts the requests of every worker against one limit', () => {
    const { admit } = handlersFor({ concurrent_requests: 2 });
    expect(admit(fakeWorker(1), 'ann', 'p1').admitted).to.equal(true);
    expect(admit(fakeWorker(2), 'ann', 'p2').admitted).to.equal(true);
    expect(admit(fakeWorker(3), 'ann', 'p3').admitted).to.equal(false);
  });

  it('frees a permit once, however often its release arrives', () => {
    const { admit, release } = handlersFor({ concurrent_requests: 2 });
    const worker = fakeWorker(1);
    admit(worker, 'ann', 'p1');
    admit(worker, 'ann', 'p2');
    release(worker, 'p1');
    release(worker, 'p1');
    expect(admit(worker, 'ann', 'p3').admitted).to.equal(true);
    expect(admit(worker, 'ann', 'p4').admitted).to.equal(false);
  });

  it('drops the permits of a worker that exits', () => {
    const { admit } = handlersFor({ concurrent_requests: 2 });
    const leaving = fakeWorker(1);
    const staying = fakeWorker(2);
    admit(leaving, 'ann', 'p1');
    admit(staying, 'ann', 'p2');
    leaving.emit('exit', 1, null);
    expect(admit(staying, 'ann', 'p3').admitted).to.equal(true);
    expect(admit(staying, 'ann', 'p4').admitted).to.equal(false);
  });

  it('rejects an admission without a user id', () => {
    const handlers = limitHandlers(settings({ concurrent_requests: 1 }));
    expect(() => handlers['limits.admit']!({ permit: 'p1' }, fakeWorker(1))).to.throw(/userId/);
  });
});
