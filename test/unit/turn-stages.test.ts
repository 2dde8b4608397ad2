import { expect } from 'chai';
import { EventBus } from '../../runtime/observability/event-bus.js';
import { timedStage } from '../../runtime/observability/turn-stages.js';

describe('timedStage', () => {
  it('tells the stage and how long its work took when the work resolves, and returns its result', async () => {
    const events = new EventBus();
    const told: Array<{ stage: string; durationMs: number }> = [];
    events.on('turn:stage', (payload) => told.push(payload));
    const result = await timedStage(events, 'user_committed', () => new Promise<string>((resolve) => setTimeout(() => resolve('committed'), 20)));
    expect(result).to.equal('committed');
    expect(told).to.have.length(1);
    expect(told[0]!.stage).to.equal('user_committed');
    expect(told[0]!.durationMs).to.be.at.least(15);
  });

  it('tells the stage when the work rejects, and rejects with its error', async () => {
    const events = new EventBus();
    const told: string[] = [];
    events.on('turn:stage', ({ stage }) => told.push(stage));
    const failure = new Error('lease lost');
    const outcome = await timedStage(events, 'session_wait', () => Promise.reject(failure)).catch((error: unknown) => error);
    expect(outcome).to.equal(failure);
    expect(told).to.deep.equal(['session_wait']);
  });
});
