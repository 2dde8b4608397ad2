import { expect } from 'chai';
import { EventBus } from '../../runtime/observability/event-bus.js';
import { DurableWriter } from '../../runtime/sessions/durable-writer.js';

/** A write the database keeps refusing for want of a connection: the writer retries it without end. */
function unreachable(): Promise<never> {
  return Promise.reject(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }));
}

describe('DurableWriter.flush', () => {
  it('waits for every queued write and then reports none pending', async () => {
    const writer = new DurableWriter(new EventBus(), { initialDelayMs: 1 });
    let stored = 0;
    void writer.write('a', 'store a', async () => void (stored += 1));
    void writer.write('b', 'store b', async () => void (stored += 1));
    expect(await writer.flush()).to.deep.equal(new Map());
    expect(stored).to.equal(2);
  });

  it('gives up waiting after its bound while a write keeps failing, and says what is still pending, by operation', async () => {
    const writer = new DurableWriter(new EventBus(), { initialDelayMs: 5, maxDelayMs: 20 });
    void writer.write('session-1', 'store the reply', unreachable).catch(() => undefined);
    void writer.write('session-1', 'store the reply', unreachable).catch(() => undefined);
    void writer.write('session-2', 'consolidate long-term memory', unreachable).catch(() => undefined);
    void writer.write('session-3', 'store a turn step', async () => undefined);
    const started = Date.now();
    const pending = await writer.flush(150);
    expect(Date.now() - started).to.be.within(140, 1_000);
    expect(pending).to.deep.equal(new Map([['store the reply', 2], ['consolidate long-term memory', 1]]));
    writer.close();
  });
});
