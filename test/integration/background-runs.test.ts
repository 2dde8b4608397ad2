import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { BackgroundRuns, RUN_CANCELLED } from '../../runtime/responses/background-runs.js';
import type { BackgroundResponseStore, ResponseStore } from '../../runtime/ports.js';
import { createBackgroundResponseRepository, createResponseRepository, migrateToLatest } from '../../storage/index.js';
import { queuedResponse } from '../support/background-responses.js';
import { databaseTargets } from '../support/databases.js';
import type { TestDatabase } from '../support/databases.js';
import { waitFor } from '../support/wait-for.js';

/** Long enough that a loaded machine's pauses never pass for a dead process; renewed every third of it. */
const LEASE_MS = 1_000;


for (const target of databaseTargets()) {
  describe(`BackgroundRuns of two processes on ${target.name}`, () => {
    let database: TestDatabase;
    let store: BackgroundResponseStore;
    let responses: ResponseStore;
    let here: BackgroundRuns;
    let there: BackgroundRuns;
    const errors: Error[] = [];

    before(async () => {
      database = await target.open({ vector: false });
      await migrateToLatest(database, { vector: false, embeddingDimensions: 3 });
      store = createBackgroundResponseRepository(database.db);
      responses = createResponseRepository(database.db);
      const deps = { store, leaseMs: LEASE_MS, maxAttempts: 2, eventRetentionMs: 60_000, onError: (error: Error) => errors.push(error) };
      here = new BackgroundRuns(deps);
      there = new BackgroundRuns(deps);
    });
    after(async () => {
      await here?.stop(0);
      await there?.stop(0);
      await database?.close();
    });

    /** Starts a run here that waits until its signal aborts, and says why it did. */
    async function runHere(): Promise<{ id: string; reason: Promise<unknown> }> {
      const record = queuedResponse();
      await store.start(record, [], here.runner, LEASE_MS, '{}');
      let settle!: (reason: unknown) => void;
      const reason = new Promise<unknown>((resolve) => (settle = resolve));
      here.run(record.id, (signal) => new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(settle(signal.reason)), { once: true })));
      return { id: record.id, reason };
    }

    async function statusOf(id: string): Promise<unknown> {
      return ((await responses.get(id))!.body as { status: string }).status;
    }

    /** When the stored lease of a run ends. */
    async function expiryOf(id: string): Promise<number> {
      const row = await database.db.selectFrom('background_runs').select('expires_at').where('response_id', '=', id).executeTakeFirstOrThrow();
      return new Date(row.expires_at).getTime();
    }

    it('keeps a run alive past its lease while its process renews it', async () => {
      const { id } = await runHere();
      const firstExpiry = await expiryOf(id);
      // Past the first lease's end, and renewed since: unrenewed, it would have lapsed by now.
      await waitFor(async () => Date.now() > firstExpiry && (await expiryOf(id)) > Date.now(), 'a renewal past the first lease');
      expect(await there.settleLapsed()).to.not.include(id);
      await here.cancel(id);
    });

    it('cancels a run when another process asks, at the next renewal', async () => {
      const { id, reason } = await runHere();
      expect(await there.cancel(id)).to.equal(true);
      expect(await reason).to.equal(RUN_CANCELLED);
    });

    it('cancels a run whose response was deleted', async () => {
      const { id, reason } = await runHere();
      await responses.remove(id);
      expect(await reason).to.equal(RUN_CANCELLED);
    });

    it('wakes a reader here as soon as events are stored, and one elsewhere only by its poll', async () => {
      const id = `resp_${randomUUID()}`;
      const gone = new AbortController();
      const started = performance.now();
      const woken = here.waitForEvents(id, 5_000, gone.signal);
      here.eventsStored(id);
      await woken;
      expect(performance.now() - started).to.be.below(1_000);
      const elsewhere = there.waitForEvents(id, 100, gone.signal);
      here.eventsStored(id);
      const waited = performance.now();
      await elsewhere;
      expect(performance.now() - waited).to.be.at.least(50);
    });

    it('fails the response of a run nobody renews once its lease lapsed', async () => {
      const record = queuedResponse();
      await store.start(record, [], `gone-${randomUUID()}`, LEASE_MS, '{}');
      expect(await there.settleLapsed()).to.not.include(record.id);
      // Either process may fail it: the explicit call here or one of the sweeps that both make.
      await waitFor(async () => (await there.settleLapsed(), (await statusOf(record.id)) === 'failed'), 'the lapsed run failed', 5_000);
      expect(errors).to.deep.equal([]);
    });

    it('takes a lapsed run over in a process that continues it, again each time it lapses, and fails it once taken over the most times', async () => {
      // Both processes take runs over (their sweeps too) and never run them, as processes that died at once would.
      const taken: number[] = [];
      for (const runs of [here, there]) runs.onTakeOver((run) => taken.push(run.attempts));
      const record = queuedResponse();
      await store.start(record, [], `gone-${randomUUID()}`, LEASE_MS, '{"input":"hi"}');
      await waitFor(async () => (await there.settleLapsed(), taken.length === 2), 'two takeovers', 10_000);
      expect(taken).to.deep.equal([1, 2]);
      expect(await statusOf(record.id)).to.equal('queued');
      await waitFor(async () => (await there.settleLapsed(), (await statusOf(record.id)) === 'failed'), 'the run given up', 5_000);
      expect(taken, 'no third takeover').to.deep.equal([1, 2]);
      const body = (await responses.get(record.id))!.body as { status: string; error: { message: string } };
      expect(body.error.message).to.equal('the service process running this response stopped before it finished, and so did the 2 that took it over (sessions.max_turn_attempts)');
      expect(errors).to.deep.equal([]);
    });
  });
}
