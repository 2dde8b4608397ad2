import { expect } from 'chai';
import { createWebhookRepository, migrateToLatest } from '../../storage/index.js';
import type { WebhookStore } from '../../runtime/ports.js';
import { databaseTargets, type TestDatabase } from '../support/databases.js';

for (const target of databaseTargets()) {
  describe(`WebhookStore.countPending on ${target.name}`, () => {
    let database: TestDatabase;
    let store: WebhookStore;

    before(async () => {
      database = await target.open();
      await migrateToLatest(database, { vector: target.hasVector, embeddingDimensions: 3 });
      store = createWebhookRepository(database.db);
    });
    after(async () => {
      await database?.close();
    });

    it('counts the pending deliveries, not the delivered or failed ones', async () => {
      expect(await store.countPending()).to.equal(0);
      await store.createSubscription({ id: 'sub_backlog', url: 'https://example.com/hook', events: ['*'], secret: 'whsec_backlog', active: true });
      const delivery = (n: number) => ({ deliveryId: `dlv_backlog_${n}`, subscriptionId: 'sub_backlog', agentId: `agent-${n}`, event: 'turn.completed', payload: '{}' });
      await store.enqueue([delivery(1), delivery(2), delivery(3)]);
      expect(await store.countPending()).to.equal(3);

      const claimed = await store.claimDueHeads('process-a', 60_000, 10);
      expect(claimed).to.have.length(3);
      expect(await store.markDelivered(claimed[0]!.seq, 'process-a', 200)).to.equal(true);
      const failure = { attempts: 1, failed: true, retryAfterMs: 0, lastStatus: 500, lastError: 'HTTP 500' };
      expect(await store.markFailedAttempt(claimed[1]!.seq, 'process-a', failure)).to.equal(true);
      expect(await store.countPending()).to.equal(1);
    });
  });
}
