import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sql } from 'kysely';
import { bodyTextOf } from '../../gateway/responses/responses-format.js';
import type { BackgroundResponseStore, ResponseStore } from '../../runtime/ports.js';
import { createBackgroundResponseRepository, createResponseRepository, migrateToLatest } from '../../storage/index.js';
import { QUEUED_BODY, queuedResponse } from '../support/background-responses.js';
import { databaseTargets } from '../support/databases.js';
import type { TestDatabase } from '../support/databases.js';

/** The request a background response was started with, as stored. */
const REQUEST = '{"input":"hello","background":true}';

/** An event as the stream numbers and writes it. */
function event(sequence: number, type = 'response.output_text.delta') {
  return { sequence, type, data: JSON.stringify({ type, sequence_number: sequence }) };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

for (const target of databaseTargets()) {
  describe(`createBackgroundResponseRepository on ${target.name}`, () => {
    let database: TestDatabase;
    let background: BackgroundResponseStore;
    let responses: ResponseStore;

    before(async () => {
      database = await target.open({ vector: false });
      await migrateToLatest(database, { vector: false, embeddingDimensions: 3 });
      background = createBackgroundResponseRepository(database.db);
      responses = createResponseRepository(database.db);
    });
    after(async () => {
      await database?.close();
    });

    /** The runs of `runner` that renewing sees, by id. */
    async function runsOf(runner: string) {
      return new Map((await background.renew(runner, 60_000)).map((run) => [run.id, run.cancelRequested]));
    }

    it('stores a started response with its first events and its run, which its runner renews and a client can ask to cancel', async () => {
      const record = queuedResponse();
      const runner = `runner-${randomUUID()}`;
      await background.start(record, [event(0, 'response.created'), event(1, 'response.queued')], runner, 60_000, REQUEST);
      expect((await responses.get(record.id))!.body).to.deep.include({ id: record.id, ...QUEUED_BODY });
      expect((await background.eventsAfter(record.id, -1, 10)).map((stored) => stored.type)).to.deep.equal(['response.created', 'response.queued']);
      expect(await runsOf(runner)).to.deep.equal(new Map([[record.id, false]]));
      expect(await runsOf(`runner-${randomUUID()}`)).to.deep.equal(new Map());
      expect(await background.requestCancel(record.id)).to.equal(true);
      expect(await runsOf(runner)).to.deep.equal(new Map([[record.id, true]]));
      expect(await background.requestCancel('resp_none')).to.equal(false);
    });

    it('appends events once each, with the body as it stands, and pages them by sequence number', async () => {
      const record = queuedResponse();
      await background.start(record, [], `runner-${randomUUID()}`, 60_000, REQUEST);
      await background.record(record.id, [event(0), event(1)], bodyTextOf({ status: 'in_progress', output: ['partial'] }));
      // A batch written again after a failure stores nothing twice; no body leaves the body as it was.
      await background.record(record.id, [event(1), event(2)]);
      expect((await responses.get(record.id))!.body).to.deep.include({ status: 'in_progress', output: ['partial'] });
      expect((await background.eventsAfter(record.id, -1, 10)).map((stored) => stored.sequence)).to.deep.equal([0, 1, 2]);
      expect(await background.eventsAfter(record.id, 0, 1)).to.deep.equal([event(1)]);
      expect(await background.eventsAfter(record.id, 2, 10)).to.deep.equal([]);
    });

    it("ends a run: the final body, history hash and session, the last events, and no run left to renew", async () => {
      const record = queuedResponse();
      const runner = `runner-${randomUUID()}`;
      await background.start(record, [], runner, 60_000, REQUEST);
      await background.record(record.id, [event(0)]);
      await background.finish(record.id, { body: bodyTextOf({ status: 'completed' }), historyHash: 'h-end', sessionId: 's-forked' }, [event(1, 'response.completed')]);
      const stored = (await responses.get(record.id))!;
      expect(stored).to.deep.include({ historyHash: 'h-end', sessionId: 's-forked' });
      expect(stored!.body).to.deep.include({ id: record.id, status: 'completed' });
      expect((await background.eventsAfter(record.id, -1, 10)).map((stored) => stored.type)).to.deep.equal(['response.output_text.delta', 'response.completed']);
      expect(await runsOf(runner)).to.deep.equal(new Map());
    });

    it('fails a response whose run lapsed, once, with a last response.failed event after the stored ones', async () => {
      const lapsed = queuedResponse();
      const live = queuedResponse();
      await background.start(lapsed, [], `runner-${randomUUID()}`, 1, REQUEST);
      await background.start(live, [], `runner-${randomUUID()}`, 60_000, REQUEST);
      await background.record(lapsed.id, [event(0), event(1)]);
      await sleep(20);
      const failed = await background.failAbandoned('the process stopped', 0);
      expect(failed).to.include(lapsed.id).and.not.include(live.id);
      expect(await background.failAbandoned('the process stopped', 0)).to.not.include(lapsed.id);
      const body = (await responses.get(lapsed.id))!.body;
      expect(body).to.deep.include({ status: 'failed', error: { code: 'server_error', message: 'the process stopped' } });
      const last = (await background.eventsAfter(lapsed.id, 1, 10))[0]!;
      expect(last).to.deep.include({ sequence: 2, type: 'response.failed' });
      expect(JSON.parse(last.data)).to.deep.equal({ type: 'response.failed', sequence_number: 2, response: body });
      expect((await responses.get(live.id))!.body.status).to.equal('queued');
    });

    it('fails every running response when asked to (the embedded database at start), numbering the event from 0 when none was stored', async () => {
      const record = queuedResponse();
      await background.start(record, [], `runner-${randomUUID()}`, 60_000, REQUEST);
      expect(await background.failAbandoned('stopped', 0, true)).to.include(record.id);
      expect((await background.eventsAfter(record.id, -1, 10)).map((stored) => stored.sequence)).to.deep.equal([0]);
    });

    it('takes over a lapsed run for one process, with its request, body and last shown step, until it was taken over the most times', async () => {
      const record = queuedResponse();
      await background.start(record, [event(0), event(1)], `runner-${randomUUID()}`, 1, REQUEST);
      await background.record(record.id, [event(2), event(3)], undefined, 3);
      await background.record(record.id, [event(4)]);
      await sleep(20);
      // Runs that may still be taken over are not failed; of two processes taking over at once, one gets the run.
      expect(await background.failAbandoned('stopped', 2)).to.not.include(record.id);
      const [a, b] = await Promise.all([background.takeOver('runner-a', 60_000, 2), background.takeOver('runner-b', 60_000, 2)]);
      const taken = [...a, ...b].filter((run) => run.id === record.id);
      expect(taken).to.have.length(1);
      expect(taken[0]).to.deep.include({ userId: record.userId, sessionId: record.sessionId, request: REQUEST, shownThrough: 3, attempts: 1 });
      expect(JSON.parse(taken[0]!.body)).to.deep.equal(QUEUED_BODY);
      // A run taken over is held: nobody takes it until it lapses again.
      expect((await background.takeOver('runner-c', 60_000, 2)).map((run) => run.id)).to.not.include(record.id);
      const lapse = () => sql`update background_runs set expires_at = now() - interval '1 second' where response_id = ${record.id}`.execute(database.db);
      await lapse();
      expect((await background.takeOver('runner-c', 60_000, 2)).find((run) => run.id === record.id)).to.deep.include({ attempts: 2 });
      // Taken over twice, the most allowed: when it lapses again it is failed instead.
      await lapse();
      expect((await background.takeOver('runner-d', 60_000, 2)).map((run) => run.id)).to.not.include(record.id);
      expect(await background.failAbandoned('stopped twice', 2)).to.include(record.id);
    });

    it('keeps a cancel asked before the run lapsed for the process that takes it over', async () => {
      const record = queuedResponse();
      await background.start(record, [], `runner-${randomUUID()}`, 1, REQUEST);
      expect(await background.requestCancel(record.id)).to.equal(true);
      await sleep(20);
      const runner = `runner-${randomUUID()}`;
      expect((await background.takeOver(runner, 60_000, 2)).map((run) => run.id)).to.include(record.id);
      expect(await runsOf(runner)).to.deep.equal(new Map([[record.id, true]]));
    });

    it('rewinds the events to the last shown step, numbering the next after every event stored', async () => {
      const record = queuedResponse();
      await background.start(record, [event(0), event(1)], `runner-${randomUUID()}`, 60_000, REQUEST);
      await background.record(record.id, [event(2), event(3), event(4)]);
      const { events, nextSequence } = await background.rewind(record.id, 2);
      expect(events.map((stored) => stored.sequence)).to.deep.equal([0, 1, 2]);
      expect(nextSequence).to.equal(5);
      expect((await background.eventsAfter(record.id, -1, 10)).map((stored) => stored.sequence)).to.deep.equal([0, 1, 2]);
      expect((await background.rewind(record.id, 2)).nextSequence).to.equal(3);
    });

    it('prunes the old events of ended responses only', async () => {
      const ended = queuedResponse();
      const running = queuedResponse();
      await background.start(ended, [], `runner-${randomUUID()}`, 60_000, REQUEST);
      await background.start(running, [], `runner-${randomUUID()}`, 60_000, REQUEST);
      await background.record(running.id, [event(0)]);
      await background.finish(ended.id, { body: bodyTextOf({ status: 'completed' }), historyHash: 'h', sessionId: ended.sessionId }, [event(0, 'response.completed')]);
      await sleep(20);
      expect(await background.pruneEvents(60_000)).to.equal(0);
      expect(await background.pruneEvents(5)).to.be.at.least(1);
      expect(await background.eventsAfter(ended.id, -1, 10)).to.deep.equal([]);
      expect(await background.eventsAfter(running.id, -1, 10)).to.have.length(1);
    });

    it('lets the run of a deleted response write without storing anything', async () => {
      const record = queuedResponse();
      await background.start(record, [], `runner-${randomUUID()}`, 60_000, REQUEST);
      expect(await responses.remove(record.id)).to.equal(true);
      await background.record(record.id, [event(0)], bodyTextOf({ status: 'in_progress' }));
      await background.finish(record.id, { body: bodyTextOf({ status: 'cancelled' }), historyHash: 'h', sessionId: record.sessionId }, [event(1)]);
      expect(await responses.get(record.id)).to.equal(undefined);
      expect(await background.eventsAfter(record.id, -1, 10)).to.deep.equal([]);
    });
  });
}
