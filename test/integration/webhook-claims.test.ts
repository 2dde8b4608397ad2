import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Kysely } from 'kysely';
import winston from 'winston';
import { DurableWriter } from '../../runtime/sessions/durable-writer.js';
import { EventBus } from '../../runtime/observability/event-bus.js';
import { newDeliveryId, WebhookDispatcher, type WebhookSettings } from '../../runtime/webhooks/webhook-dispatcher.js';
import { signedPayloadText } from '../../runtime/webhooks/webhook-signature.js';
import type { DatabaseSchema } from '../../storage/database-schema.js';
import { createWebhookRepository, migrateToLatest, type Database } from '../../storage/index.js';
import type { WebhookStore } from '../../runtime/ports.js';
import { databaseTargets, type TestDatabase } from '../support/databases.js';
import { waitFor } from '../support/wait-for.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

const SECRET = 'whsec_claims-0123456789';
const logger = winston.createLogger({ silent: true });

/** Fast loop, quick retries, and a claim lease that outlives any test. */
const SETTINGS: WebhookSettings = {
  allowHttp: true,
  allowPrivateTargets: true,
  maxAttempts: 1000,
  initialBackoffMs: 20,
  maxBackoffMs: 100,
  timeoutMs: 5000,
  pollMs: 10,
};

/** What one service process would run: its own event bus, writer and dispatcher, on its own pool. */
type TestProcess = {
  events: EventBus;
  dispatcher: WebhookDispatcher;
  /** Delivery ids this process claimed, in order. */
  claimed: string[];
  /** From now on every database call fails, as for a process killed with SIGKILL. */
  kill(): void;
  stop(): Promise<void>;
};

async function startProcess(db: Kysely<DatabaseSchema>, settings: Partial<WebhookSettings> = {}): Promise<TestProcess> {
  const store = createWebhookRepository(db);
  const claimed: string[] = [];
  let alive = true;
  const calls = store as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const guarded = Object.fromEntries(
    Object.entries(calls).map(([name, call]) => [
      name,
      async (...args: unknown[]) => {
        if (!alive) throw new Error('this process is gone');
        return call(...args);
      },
    ]),
  ) as WebhookStore;
  const claimDueHeads = guarded.claimDueHeads;
  guarded.claimDueHeads = async (...args) => {
    const heads = await claimDueHeads(...args);
    claimed.push(...heads.map((delivery) => delivery.deliveryId));
    return heads;
  };
  const events = new EventBus();
  const writer = new DurableWriter(events, { initialDelayMs: 10, maxDelayMs: 50 });
  const dispatcher = new WebhookDispatcher({ events, store: guarded, writer, logger, settings: { ...SETTINGS, ...settings } });
  await dispatcher.start();
  return {
    events,
    dispatcher,
    claimed,
    kill: () => (alive = false),
    async stop() {
      await dispatcher.stop();
      writer.close();
    },
  };
}

/** A runtime event that becomes one `agent.state_changed` delivery; `step` shows its order. */
function emitStep(events: EventBus, agent: string, step: number): void {
  events.emit('session:state_changed', { sessionId: agent, userId: 'user-1', from: 'a', to: 'b', reason: `step ${step}` });
}

function stepOf(raw: string): number {
  const payload = JSON.parse(raw) as { data: { transition_reason: string } };
  return Number(payload.data.transition_reason.replace('step ', ''));
}

async function rowsOf(db: Kysely<DatabaseSchema>, subscriptionId: string) {
  return db.selectFrom('webhook_deliveries').selectAll().where('subscription_id', '=', subscriptionId).orderBy('id').execute();
}

for (const target of databaseTargets()) {
  describe(`webhook claims on ${target.name}`, () => {
    /** One database per target; `peer` is a second pool onto it, as another process would have. */
    let database: TestDatabase;
    let peer: Database;

    before(async () => {
      database = await target.open({ vector: false });
      await migrateToLatest(database, { vector: false, embeddingDimensions: 3 });
      peer = await database.openPeer();
    });
    after(async () => {
      await database?.close();
    });

    describe('createWebhookRepository', () => {
      let store: WebhookStore;
      let peerStore: WebhookStore;
      const created: string[] = [];

      before(() => {
        store = createWebhookRepository(database.db);
        peerStore = createWebhookRepository(peer.db);
      });
      afterEach(async () => {
        // The dispatcher tests' processes must not pick up these subscriptions.
        for (const id of created.splice(0)) await store.deleteSubscription(id);
      });

      async function subscription(): Promise<string> {
        const id = `wh_${randomUUID()}`;
        await store.createSubscription({ id, url: 'http://127.0.0.1:9/hook', events: ['*'], secret: SECRET, active: true });
        created.push(id);
        return id;
      }

      function delivery(subscriptionId: string, agentId: string) {
        return {
          deliveryId: newDeliveryId(),
          subscriptionId,
          agentId,
          event: 'agent.created',
          payload: signedPayloadText(SECRET, { event: 'agent.created', timestamp: new Date().toISOString(), agent_id: agentId, data: {} }),
        };
      }

      it('gives each head to exactly one of two processes claiming at the same time, and never a later delivery of the agent', async () => {
        const subscriptionId = await subscription();
        const agents = Array.from({ length: 20 }, (_, index) => `agent-${index}`);
        for (let round = 0; round < 3; round += 1) await store.enqueue(agents.map((agent) => delivery(subscriptionId, agent)));
        const heads = new Set((await rowsOf(database.db, subscriptionId)).slice(0, agents.length).map((row) => row.delivery_id));

        const [first, second] = await Promise.all([store.claimDueHeads('process-a', 60_000, 100), peerStore.claimDueHeads('process-b', 60_000, 100)]);
        const all = [...first, ...second].map((row) => row.deliveryId);
        expect(new Set(all).size, 'no head claimed twice').to.equal(all.length);
        expect(new Set(all)).to.deep.equal(heads);
        expect(await store.claimDueHeads('process-c', 60_000, 100), 'nothing left to claim while the heads are held').to.deep.equal([]);
      });

      it('records an outcome only for the process that still holds the claim', async () => {
        const subscriptionId = await subscription();
        await store.enqueue([delivery(subscriptionId, 'agent-x')]);
        const [mine] = await store.claimDueHeads('process-a', 1, 10);
        // process-a's claim lapses; process-b takes the delivery over.
        const [taken] = await waitFor(async () => {
          const rows = await peerStore.claimDueHeads('process-b', 60_000, 10);
          return rows.length > 0 ? rows : undefined;
        }, 'the lapsed claim taken over');
        expect(taken!.seq).to.equal(mine!.seq);

        expect(await store.markDelivered(mine!.seq, 'process-a', 204)).to.equal(false);
        const failure = { attempts: 1, failed: true, retryAfterMs: 0, lastStatus: 500, lastError: 'HTTP 500' };
        expect(await store.markFailedAttempt(mine!.seq, 'process-a', failure)).to.equal(false);
        const [untouched] = await rowsOf(database.db, subscriptionId);
        expect(untouched).to.include({ status: 'pending', attempts: 0, claimed_by: 'process-b' });

        expect(await peerStore.markDelivered(taken!.seq, 'process-b', 204)).to.equal(true);
        const [done] = await rowsOf(database.db, subscriptionId);
        expect(done).to.include({ status: 'delivered', attempts: 1, last_status: 204, claimed_by: null, claimed_until: null });
      });

      it('gives claims back without touching the delivery when released', async () => {
        const subscriptionId = await subscription();
        await store.enqueue([delivery(subscriptionId, 'agent-y')]);
        const [claimed] = await store.claimDueHeads('process-a', 60_000, 10);
        await store.releaseClaims([claimed!.seq], 'process-b');
        expect(await peerStore.claimDueHeads('process-b', 60_000, 10), "another process's release frees nothing").to.deep.equal([]);
        await store.releaseClaims([claimed!.seq], 'process-a');
        const [again] = await peerStore.claimDueHeads('process-b', 60_000, 10);
        expect(again).to.include({ seq: claimed!.seq, status: 'pending', attempts: 0 });
      });

      it('queues nothing for a subscription deleted or deactivated by another process, and the rest still', async () => {
        const [kept, deleted, inactive] = [await subscription(), await subscription(), await subscription()];
        await peerStore.deleteSubscription(deleted);
        await peerStore.setActive(inactive, false);
        await store.enqueue([delivery(kept, 'agent-z'), delivery(deleted, 'agent-z'), delivery(inactive, 'agent-z')]);
        expect(await rowsOf(database.db, kept)).to.have.length(1);
        expect(await rowsOf(database.db, deleted)).to.have.length(0);
        expect(await rowsOf(database.db, inactive)).to.have.length(0);
      });
    });

    describe('WebhookDispatcher in two processes', () => {
      let receiver: WebhookReceiver;
      let subscriptionId: string;
      const processes: TestProcess[] = [];

      beforeEach(async () => {
        receiver = new WebhookReceiver(SECRET);
        await receiver.start();
        subscriptionId = `wh_${randomUUID()}`;
        // Created before the processes start, so both have it cached from their first read.
        const url = `http://127.0.0.1:${receiver.port}/hook`;
        await createWebhookRepository(database.db).createSubscription({ id: subscriptionId, url, events: ['*'], secret: SECRET, active: true });
      });
      afterEach(async () => {
        receiver.releaseHeld();
        await Promise.all(processes.splice(0).map((each) => each.stop()));
        await receiver.stop();
        // Later tests' processes must not pick up this test's subscription.
        await createWebhookRepository(database.db).deleteSubscription(subscriptionId);
        expect(receiver.badSignatures, 'every signature verifies').to.deep.equal([]);
      });

      async function start(db: Kysely<DatabaseSchema>, settings?: Partial<WebhookSettings>): Promise<TestProcess> {
        const started = await startProcess(db, settings);
        processes.push(started);
        return started;
      }

      it('delivers every event exactly once, in order per agent, with both processes sending', async () => {
        const agents = Array.from({ length: 6 }, (_, index) => `agent-${index}`);
        const steps = 8;
        const first = await start(database.db);
        // The first delivery is held, so the first process stays busy while the second one works.
        receiver.holdWhen = () => receiver.received.length === 1;
        emitStep(first.events, agents[0]!, 0);
        await waitFor(() => receiver.heldCount === 1, 'the first delivery held');
        const second = await start(peer.db);
        for (let step = 0; step < steps; step += 1) {
          agents.forEach((agent, index) => {
            if (index === 0 && step === 0) return;
            // Each process enqueues the events of its own turns.
            emitStep(index % 2 === 0 ? first.events : second.events, agent, step);
          });
        }
        await waitFor(() => second.claimed.length > 0, 'the second process sending');
        receiver.releaseHeld();

        const total = agents.length * steps;
        await waitFor(async () => {
          const rows = await rowsOf(database.db, subscriptionId);
          return rows.length === total && rows.every((row) => row.status === 'delivered');
        }, 'every delivery delivered');
        const ids = receiver.received.map((entry) => entry.id);
        expect(ids).to.have.length(total);
        expect(new Set(ids).size, 'no delivery sent twice').to.equal(total);
        expect(receiver.overlaps, 'one request per agent in flight at a time').to.deep.equal([]);
        for (const agent of agents) {
          const arrived = receiver.received.filter((entry) => entry.payload.agent_id === agent).map((entry) => stepOf(entry.raw));
          expect(arrived, agent).to.deep.equal(Array.from({ length: steps }, (_, step) => step));
        }
        expect(first.claimed.length).to.be.greaterThan(0);
        expect(first.claimed.length + second.claimed.length).to.equal(total);
        const rows = await rowsOf(database.db, subscriptionId);
        expect(rows.filter((row) => row.claimed_by !== null), 'no claim left behind').to.deep.equal([]);
      });

      it('takes over, once the claim lapses, a delivery whose process died in the middle of the attempt', async () => {
        const settings = { timeoutMs: 300, claimLeaseMs: 1000 };
        const first = await start(database.db, settings);
        receiver.holdWhen = () => receiver.received.length === 1;
        emitStep(first.events, 'agent-k', 0);
        emitStep(first.events, 'agent-k', 1);
        await waitFor(async () => (await rowsOf(database.db, subscriptionId)).length === 2 && receiver.heldCount === 1, 'both queued, the first in flight');
        first.kill();
        const second = await start(peer.db, settings);

        await waitFor(async () => (await rowsOf(database.db, subscriptionId)).every((row) => row.status === 'delivered'), 'both delivered', 10_000);
        const [head, next] = await rowsOf(database.db, subscriptionId);
        // At least once: the receiver saw the head twice (dedupe by X-Webhook-Id), then the next one.
        expect(receiver.received.map((entry) => entry.id)).to.deep.equal([head!.delivery_id, head!.delivery_id, next!.delivery_id]);
        expect(receiver.received.map((entry) => stepOf(entry.raw))).to.deep.equal([0, 0, 1]);
        const [killedAttempt, takeover] = receiver.received;
        // Not before the claim lapsed (it was taken a moment before the first attempt arrived).
        expect(takeover!.arrivedAt - killedAttempt!.arrivedAt).to.be.at.least(settings.claimLeaseMs - 250);
        expect(second.claimed).to.include(head!.delivery_id);
        expect(head).to.include({ attempts: 1, claimed_by: null });
      });

      it('lets the attempt in flight finish when stopped, and leaves the rest pending and unclaimed for the next run', async () => {
        const first = await start(database.db);
        receiver.holdWhen = () => true;
        emitStep(first.events, 'agent-s', 0);
        emitStep(first.events, 'agent-s', 1);
        await waitFor(async () => (await rowsOf(database.db, subscriptionId)).length === 2 && receiver.heldCount === 1, 'both queued, the first in flight');
        const stopping = first.stop();
        receiver.releaseHeld();
        await stopping;

        const [head, next] = await rowsOf(database.db, subscriptionId);
        expect(head).to.include({ status: 'delivered', claimed_by: null });
        expect(next).to.include({ status: 'pending', attempts: 0, claimed_by: null });
        expect(receiver.received).to.have.length(1);

        receiver.holdWhen = undefined;
        await start(database.db);
        await waitFor(async () => (await rowsOf(database.db, subscriptionId))[1]!.status === 'delivered', 'the next run sending the rest');
        expect(receiver.received.map((entry) => entry.id)).to.deep.equal([head!.delivery_id, next!.delivery_id]);
      });
    });
  });
}
