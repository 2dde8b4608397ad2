/**
 * A cluster worker for the usage-limit tests: it runs the worker's limiter (limits from
 * LIMITS_JSON) and obeys the primary's probes, answering each with what happened. It says
 * `{ ready: true }` once it listens: probes sent before that would be lost.
 */
import { isServiceError } from '../../runtime/service-error.js';
import { createUsageLimiter, type Release } from '../../gateway/http/usage-limits.js';

/** A probe from the test: `admit` a request of a user, or `release` the oldest permit held. */
export type LimitProbe = { probe: number; op: 'admit' | 'release'; userId?: string };

/** The worker's answer to a probe, with every warning its limiter logged so far. */
export type LimitProbeAnswer = { probe: number; admitted?: boolean; retryAfter?: string; message?: string; warnings: string[] };

const warnings: string[] = [];
const limiter = createUsageLimiter(JSON.parse(process.env.LIMITS_JSON!), { warn: (message) => void warnings.push(message) });
const held: Release[] = [];

process.on('message', (message: LimitProbe) => {
  if (typeof message?.probe !== 'number') return;
  void answer(message).then((reply) => process.send!({ ...reply, warnings: [...warnings] } satisfies LimitProbeAnswer));
});
process.send!({ ready: true });

async function answer(message: LimitProbe): Promise<Omit<LimitProbeAnswer, 'warnings'>> {
  if (message.op === 'release') {
    held.shift()?.();
    return { probe: message.probe };
  }
  try {
    held.push(await limiter.admit(message.userId!));
    return { probe: message.probe, admitted: true };
  } catch (error) {
    if (!isServiceError(error)) throw error;
    return { probe: message.probe, admitted: false, retryAfter: error.headers['Retry-After'], message: error.message };
  }
}
