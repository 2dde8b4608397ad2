import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sql } from 'kysely';
import type { NewResponseRecord, ResponseBody, ResponseStore, SessionProgress, SessionStore } from '../../runtime/ports.js';
import { createResponseRepository, createSessionRepository, migrateToLatest } from '../../storage/index.js';
import { databaseTargets } from '../support/databases.js';
import { bodyTextOf, responseBody } from '../../gateway/responses/responses-format.js';
import type { ResponsesRequest } from '../../gateway/responses/responses-request.js';
import type { TestDatabase } from '../support/databases.js';


/**
 * A response object with every field `responseBody` (gateway/responses/responses-format.ts) gives it, at
 * its default unless set in `fields`.
 */
function responseObject(id: string, fields: Record<string, unknown> = {}): ResponseBody {
  const frame = { id, createdAt: 1, request: { model: 'm', input: 'hi', ...fields } as ResponsesRequest, store: true };
  return { ...responseBody(frame, { status: 'completed', output: [] }), ...fields };
}

/** A turn's progress ending at `historyHash`. */
function progressTo(historyHash: string): SessionProgress {
  return { snapshot: { value: 'idle' }, currentState: 'idle', transitions: 1, historyHash };
}

for (const target of databaseTargets()) {
  describe(`createResponseRepository on ${target.name}`, () => {
    let database: TestDatabase;
    let responses: ResponseStore;
    let sessions: SessionStore;

    before(async () => {
      database = await target.open({ vector: false });
      await migrateToLatest(database, { vector: false, embeddingDimensions: 3 });
      responses = createResponseRepository(database.db);
      sessions = createSessionRepository(database.db);
    });
    after(async () => {
      await database?.close();
    });

    /** A response as the turn path gives it to storage, with its body (`responseObject` unless given) as its JSON text. */
    type StoredFields = Partial<Omit<NewResponseRecord, 'body'>> & { historyHash: string; body?: ResponseBody };

    /** Stores `response` with a turn's end in a new session of alice, as the turn path does; returns it with its body as given. */
    async function storeWithTurn(fields: StoredFields): Promise<Omit<NewResponseRecord, 'body'> & { body: ResponseBody }> {
      const sessionId = fields.sessionId ?? `s-${randomUUID()}`;
      await sessions.claim(sessionId, 'alice');
      const id = fields.id ?? `resp_${randomUUID().replaceAll('-', '')}`;
      const response = { id, userId: 'alice', sessionId, previousResponseId: null, input: [], ...fields, body: fields.body ?? responseObject(id) };
      await sessions.completeTurn(sessionId, [{ userId: 'alice', sessionId, role: 'user', message: 'hi' }], progressTo(fields.historyHash), undefined, { ...response, body: bodyTextOf(response.body) });
      return response;
    }

    it("gives back a response stored with its turn's end as it was, its JSON parsed and a creation time added", async () => {
      const id = `resp_${randomUUID().replaceAll('-', '')}`;
      const body = responseObject(id, { output: [{ type: 'message', content: [{ type: 'output_text', text: 'Echo: \u{1F600} "quoted"' }] }], metadata: { a: '1' } });
      const input = [{ id: 'msg_1', type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] }];
      const response = await storeWithTurn({ id, previousResponseId: 'resp_before', historyHash: 'h1', body, input });
      const stored = await responses.get(response.id);
      expect(stored).to.deep.include(response);
      expect(Object.keys(stored!.body)).to.deep.equal(Object.keys(body));
      expect(stored!.createdAt).to.be.instanceOf(Date);
    });

    it("stores the body's JSON text as the client is sent it and the input's, their escapes and every script whole, and the status in its column", async () => {
      const id = `resp_${randomUUID().replaceAll('-', '')}`;
      const text = 'Echo: "quoted" \\ back\\slash, tab\t, naïve 😀 日本語';
      const body = responseObject(id, { output: [{ type: 'message', content: [{ type: 'output_text', text }] }] });
      const input = [{ id: 'msg_1', type: 'message', role: 'user', content: [{ type: 'input_text', text }] }];
      await storeWithTurn({ id, historyHash: 'h-text', body, input });
      const [row] = await database.db.selectFrom('responses').select(['status', 'body', 'input']).where('id', '=', id).execute();
      expect(row).to.deep.equal({ status: 'completed', body: JSON.stringify(body), input: JSON.stringify(input) });
      expect(await responses.get(id)).to.deep.include({ body, input });
    });

    it('reads a body stored without its id, status and defaults (as bodies were from 32fbdd4 to migration 0015) whole, its fields in the schema order', async () => {
      const id = `resp_${randomUUID().replaceAll('-', '')}`;
      const body = responseObject(id, { instructions: 'Be brief.', temperature: 0.2, tools: [{ type: 'function', name: 'f', description: null, parameters: null, strict: true }] });
      await storeWithTurn({ id, historyHash: 'h-compact', body });
      const compact = { created_at: 1, instructions: 'Be brief.', model: 'm', output: [], temperature: 0.2, tools: body.tools };
      await database.db.updateTable('responses').set({ body: JSON.stringify(compact) }).where('id', '=', id).execute();
      const read = (await responses.get(id))!.body;
      expect(read).to.deep.equal(body);
      expect(Object.keys(read)).to.deep.equal(Object.keys(body));
    });

    it('stores a response once when the end of its turn is written again (a retry after a lost acknowledgement)', async () => {
      const response = await storeWithTurn({ historyHash: 'h-retry', body: { status: 'completed', n: 1 } });
      await sessions.completeTurn(response.sessionId, [], progressTo('h-retry'), undefined, { ...response, body: bodyTextOf({ status: 'completed', n: 2 }) });
      const rows = await database.db.selectFrom('responses').select('body').where('id', '=', response.id).execute();
      expect(rows).to.deep.equal([{ body: '{"status":"completed","n":1}' }]);
    });

    it('keeps a response of a usual size (about 2.3 kB) whole in its row, none of it in the TOAST table', async () => {
      const { rows } = await sql<{ toast: string }>`select reltoastrelid::regclass::text as toast from pg_class where relname = 'responses'`.execute(database.db);
      const toastRows = async () => Number((await sql<{ n: string }>`select count(*) as n from ${sql.raw(rows[0]!.toast)}`.execute(database.db)).rows[0]!.n);
      const before = await toastRows();
      // Text that does not compress, as a real reply's JSON does not by the quarter PostgreSQL asks.
      const text = Array.from({ length: 38 }, () => randomUUID()).join(' ');
      const id = `resp_${randomUUID().replaceAll('-', '')}`;
      // A body of some 2.5 kB: instructions and a reply of some length.
      const body = responseObject(id, { instructions: randomUUID().repeat(10), output: [{ type: 'message', content: [{ type: 'output_text', text }] }] });
      const input = [{ id: 'msg_1', type: 'message', role: 'user', content: [{ type: 'input_text', text: text.slice(6, 440) }] }];
      const response = await storeWithTurn({ id, historyHash: 'h-inline', body, input });
      const { rows: sizes } = await sql<{ size: number }>`select pg_column_size(responses.*) as size from responses where id = ${response.id}`.execute(database.db);
      expect(sizes[0]!.size).to.be.above(2100);
      expect(await toastRows()).to.equal(before);
      expect((await responses.get(response.id))!.body).to.deep.equal(body);
    });

    it('stores a lone surrogate of a reply as U+FFFD, as the client is sent it, and reads the body back', async () => {
      const response = await storeWithTurn({ historyHash: 'h', body: { status: 'completed', instructions: 'a\ud800b' } });
      expect((await responses.get(response.id))!.body).to.deep.include({ instructions: 'a\uFFFDb' });
    });

    it('finds the newest response of a session that ended at a history hash, and none of another session or hash', async () => {
      const sessionId = `s-${randomUUID()}`;
      await storeWithTurn({ sessionId, historyHash: 'after-1' });
      const newest = await storeWithTurn({ sessionId, historyHash: 'after-2' });
      expect(await responses.newestEndingAt(sessionId, 'after-2')).to.equal(newest.id);
      expect(await responses.newestEndingAt(sessionId, 'after-3')).to.equal(undefined);
      expect(await responses.newestEndingAt(`s-${randomUUID()}`, 'after-2')).to.equal(undefined);
    });

    it("tells where a response ended and where its session is now, in one read; a deleted session is not live", async () => {
      const sessionId = `s-${randomUUID()}`;
      const first = await storeWithTurn({ sessionId, historyHash: 'end-1' });
      expect(await responses.endOf(first.id)).to.deep.equal({ id: first.id, userId: 'alice', sessionId, historyHash: 'end-1', status: 'completed', sessionLive: true, sessionHistoryHash: 'end-1' });
      await storeWithTurn({ sessionId, historyHash: 'end-2' });
      expect(await responses.endOf(first.id)).to.deep.include({ historyHash: 'end-1', sessionLive: true, sessionHistoryHash: 'end-2' });
      await sessions.markDeleted(sessionId);
      expect(await responses.endOf(first.id)).to.deep.include({ sessionLive: false });
      expect(await responses.endOf('resp_unknown')).to.equal(undefined);
    });

    it('reads the chain of responses ending at one, oldest first, in one read and at most as many as asked', async () => {
      const first = await storeWithTurn({ historyHash: 'c1' });
      const second = await storeWithTurn({ historyHash: 'c2', previousResponseId: first.id });
      const third = await storeWithTurn({ historyHash: 'c3', previousResponseId: second.id });
      expect((await responses.chainTo(third.id, 10)).map((record) => record.id)).to.deep.equal([first.id, second.id, third.id]);
      expect((await responses.chainTo(third.id, 2)).map((record) => record.id)).to.deep.equal([second.id, third.id]);
      expect((await responses.chainTo(third.id, 10))[0]).to.deep.include(first);
      expect(await responses.chainTo('resp_unknown', 10)).to.deep.equal([]);
    });

    it('deletes a response once: the second delete and a later get find nothing', async () => {
      const response = await storeWithTurn({ historyHash: 'h' });
      expect(await responses.remove(response.id)).to.equal(true);
      expect(await responses.remove(response.id)).to.equal(false);
      expect(await responses.get(response.id)).to.equal(undefined);
    });
  });
}
