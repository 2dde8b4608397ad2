import { expect } from 'chai';
import OpenAI from 'openai';
import type { Response as OpenAIResponse, ResponseStreamEvent } from 'openai/resources/responses/responses';
import type { FakeLlm } from '../../../scripts/fake-llm-server.js';
import { lastContext, refusal } from '../../support/openai-answers.js';
import { expectSchema } from '../../support/openai-schema.js';
import { serviceStorageTargets } from '../../support/service-storage.js';
import { useServiceOn } from '../../support/target-service.js';
import type { TestService } from '../../support/service-harness.js';
import { waitFor } from '../../support/wait-for.js';

/** Twelve words the scripted LLM streams one by one, `paceMs` apart. */
function slowInput(paceMs: number): string {
  return `one two three four five six seven eight nine ten eleven twelve [[pace:${paceMs}]]`;
}

/** The text of a response's message items. */
function textOf(response: Pick<OpenAIResponse, 'output'>): string {
  return response.output.flatMap((item) => (item.type === 'message' ? item.content.map((part) => (part.type === 'output_text' ? part.text : '')) : [])).join('');
}

/** The deltas' text of streamed events. */
function deltaText(events: ResponseStreamEvent[]): string {
  return events.map((event) => (event.type === 'response.output_text.delta' ? event.delta : '')).join('');
}

for (const target of serviceStorageTargets()) {
  describe(`background responses (${target.name})`, function () {
    this.timeout(30_000);
    const service = useServiceOn(target);
    let llm: FakeLlm;
    let harness: TestService;
    let client: OpenAI;
    before(() => ({ llm, harness, client } = service));

    /** Retrieves a response until `done` holds for it. */
    function pollUntil(id: string, done: (response: OpenAIResponse) => boolean, what: string): Promise<OpenAIResponse> {
      return waitFor(async () => {
        const response = await client.responses.retrieve(id);
        expectSchema('Response', response);
        return done(response) ? response : undefined;
      }, what);
    }

    it('answers at once with a queued response, runs the turn with no client connected, and shows its progress and result on retrieve', async () => {
      const { data: created, response: answer } = await client.responses.create({ model: 'svc-agent', input: slowInput(60), background: true }).withResponse();
      expectSchema('Response', created);
      expect(created).to.include({ object: 'response', background: true, status: 'queued', store: true });
      const sessionId = answer.headers.get('x-session-id');
      expect(sessionId).to.be.a('string');
      expect(created.output).to.deep.equal([]);
      const partway = await pollUntil(created.id, (response) => response.status === 'in_progress' && textOf(response).length > 0, 'progress to show');
      expect(partway.output[0]).to.include({ type: 'message', status: 'in_progress' });
      expect('Echo: one two three four five six seven eight nine ten eleven twelve').to.include(textOf(partway));
      const done = await pollUntil(created.id, (response) => response.status === 'completed', 'the response to complete');
      expect(done.output_text).to.equal(`Echo: ${slowInput(60)}`);
      expect(done.usage?.total_tokens).to.be.greaterThan(0);
      // The turn is one of the session named at once, stored as any other turn.
      const rows = await harness.service.database.db.selectFrom('conversations').select('role').where('session_id', '=', sessionId!).orderBy('id').execute();
      expect(rows.map((row) => row.role)).to.deep.equal(['user', 'assistant']);
      // A finished background response is continued like any other.
      const next = await client.responses.create({ model: 'svc-agent', input: 'And now?', previous_response_id: created.id });
      expect(next.output_text).to.equal('Echo: And now?');
      expect(lastContext(llm).slice(1).map((message) => message.role)).to.deep.equal(['user', 'assistant', 'user']);
    });

    it('resumes a stream broken after a few deltas with starting_after: the text whole, no event repeated or missing', async () => {
      const stream = await client.responses.create({ model: 'svc-agent', input: slowInput(40), background: true, stream: true });
      const before: ResponseStreamEvent[] = [];
      for await (const event of stream) {
        before.push(event);
        if (before.filter((seen) => seen.type === 'response.output_text.delta').length === 3) break;
      }
      expect(before[0]).to.deep.include({ type: 'response.created', sequence_number: 0 });
      expect((before[0] as { response: OpenAIResponse }).response).to.include({ status: 'queued', background: true });
      const id = (before[0] as { response: OpenAIResponse }).response.id;
      const last = before.at(-1)!.sequence_number;
      // The turn goes on without the client.
      const after: ResponseStreamEvent[] = [];
      for await (const event of await client.responses.retrieve(id, { stream: true, starting_after: last })) after.push(event);
      for (const event of [...before, ...after]) expectSchema('ResponseStreamEvent', event);
      const sequences = [...before, ...after].map((event) => event.sequence_number);
      expect(sequences).to.deep.equal(sequences.map((_, index) => index));
      expect(after.at(-1)!.type).to.equal('response.completed');
      expect(deltaText([...before, ...after])).to.equal(`Echo: ${slowInput(40)}`);
      // From the start, the whole stream again.
      const again: ResponseStreamEvent[] = [];
      for await (const event of await client.responses.retrieve(id, { stream: true })) again.push(event);
      expect(again.map((event) => event.type)).to.deep.equal([...before, ...after].map((event) => event.type));
    });

    /** The events of a background response's stream read again through the SDK, after `startingAfter` when given. */
    async function replayed(id: string, startingAfter?: number): Promise<ResponseStreamEvent[]> {
      const events: ResponseStreamEvent[] = [];
      const query = startingAfter === undefined ? { stream: true as const } : { stream: true as const, starting_after: startingAfter };
      for await (const event of await client.responses.retrieve(id, query)) events.push(event);
      for (const event of events) expectSchema('ResponseStreamEvent', event);
      return events;
    }

    it('sends nothing after the last event of a finished response: its stream read from there, or past it, just ends', async () => {
      for (const [input, lastType] of [
        ['a short one', 'response.completed'],
        ['this one fails [[error:503]]', 'response.failed'],
      ] as const) {
        const created = await client.responses.create({ model: 'svc-agent', input, background: true });
        await pollUntil(created.id, (response) => response.status !== 'queued' && response.status !== 'in_progress', 'the response to end');
        const all = await replayed(created.id);
        const last = all.at(-1)!;
        expect(last.type, input).to.equal(lastType);
        expect(await replayed(created.id, last.sequence_number - 1), input).to.deep.equal([last]);
        for (const startingAfter of [last.sequence_number, last.sequence_number + 1, 99_999]) {
          expect(await replayed(created.id, startingAfter), `${input}, starting_after=${startingAfter}`).to.deep.equal([]);
          // On the wire: the stream's headers, then its end, with no event.
          const raw = await fetch(`${harness.baseURL}/responses/${created.id}?stream=true&starting_after=${startingAfter}`);
          expect(raw.status).to.equal(200);
          expect(raw.headers.get('content-type')).to.match(/^text\/event-stream/);
          expect(await raw.text()).to.equal('');
        }
      }
    });

    it('ends the stream of a running response read past its last event once the response ended, with no event', async () => {
      const created = await client.responses.create({ model: 'svc-agent', input: slowInput(30), background: true });
      expect(await replayed(created.id, 99_999)).to.deep.equal([]);
      // The stream waited for the end: it did not end while the response was running.
      expect((await client.responses.retrieve(created.id)).status).to.equal('completed');
    });

    it('streams no event of a finished response whose events were deleted after their retention; retrieve still shows it', async () => {
      const created = await client.responses.create({ model: 'svc-agent', input: 'kept a while', background: true });
      await pollUntil(created.id, (response) => response.status === 'completed', 'the response to complete');
      // What the retention sweep does to a response's events once they are old enough.
      await harness.service.database.db.deleteFrom('response_events').where('response_id', '=', created.id).execute();
      expect(await replayed(created.id)).to.deep.equal([]);
      expect(await replayed(created.id, 3)).to.deep.equal([]);
      expect((await client.responses.retrieve(created.id)).output_text).to.equal('Echo: kept a while');
    });

    it('refuses a starting_after that is not a sequence number (negative, not an integer, junk, repeated) with a 400 naming it', async () => {
      const created = await client.responses.create({ model: 'svc-agent', input: 'numbered', background: true });
      await pollUntil(created.id, (response) => response.status === 'completed', 'the response to complete');
      expect(await refusal(client.responses.retrieve(created.id, { stream: true, starting_after: -1 }))).to.deep.include({ status: 400, param: 'starting_after' });
      const queries = ['-1', '-5', '1.5', '2.0', 'abc', '', '1e3', '0x10', ' 3', '99999999999999999999', '1&starting_after=2'];
      for (const stream of ['stream=true&', '']) {
        for (const value of queries) {
          const query = `${stream}starting_after=${value.includes('&') ? value : encodeURIComponent(value)}`;
          const answer = await fetch(`${harness.baseURL}/responses/${created.id}?${query}`);
          expect(answer.status, query).to.equal(400);
          const body = (await answer.json()) as { error: { type: string; param: string } };
          expectSchema('ErrorResponse', body);
          expect(body.error, query).to.include({ type: 'invalid_request_error', param: 'starting_after' });
        }
      }
    });

    it('cancels a background response: the LLM request in flight is cancelled and it ends cancelled with the text produced so far', async () => {
      const created = await client.responses.create({ model: 'svc-agent', input: slowInput(300), background: true });
      await pollUntil(created.id, (response) => textOf(response).length > 0, 'some text');
      const cancelled = await client.responses.cancel(created.id);
      expectSchema('Response', cancelled);
      expect(cancelled).to.include({ id: created.id, status: 'cancelled', background: true });
      const text = textOf(cancelled);
      expect(text.length).to.be.greaterThan(0);
      expect(`Echo: ${slowInput(300)}`.startsWith(text)).to.equal(true);
      expect(text).to.not.equal(`Echo: ${slowInput(300)}`);
      await llm.waitForAbort(() => true, 5_000);
      expect(await client.responses.retrieve(created.id)).to.deep.include({ status: 'cancelled', output: cancelled.output });
      // Cancelling again changes nothing.
      expect(await client.responses.cancel(created.id)).to.deep.include({ status: 'cancelled', output: cancelled.output });
      // Its stream, read again, ends where it was cancelled.
      const events: ResponseStreamEvent[] = [];
      for await (const event of await client.responses.retrieve(created.id, { stream: true })) events.push(event);
      for (const event of events) expectSchema('ResponseStreamEvent', event);
      expect(deltaText(events)).to.equal(text);
    });

    it('refuses what a background response cannot do, naming the param, and stores nothing for it', async () => {
      const countResponses = async () => Number((await harness.service.database.db.selectFrom('responses').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
      const stored = await countResponses();
      expect(await refusal(client.responses.create({ model: 'svc-agent', input: 'hi', background: true, store: false }))).to.deep.include({ status: 400, param: 'store' });
      expect(await countResponses()).to.equal(stored);

      const running = await client.responses.create({ model: 'svc-agent', input: slowInput(200), background: true });
      expect(await refusal(client.responses.create({ model: 'svc-agent', input: 'next', previous_response_id: running.id }))).to.deep.include({ status: 400, param: 'previous_response_id' });
      await client.responses.cancel(running.id);

      const plain = await client.responses.create({ model: 'svc-agent', input: 'not in the background' });
      expect(await refusal(client.responses.cancel(plain.id))).to.deep.include({ status: 400, param: 'response_id' });
      expect(await refusal(client.responses.retrieve(plain.id, { stream: true }))).to.deep.include({ status: 400, param: 'stream' });
      expect(await refusal(client.responses.retrieve(running.id, { stream: true, starting_after: -5 }))).to.deep.include({ status: 400, param: 'starting_after' });
      const stranger = new OpenAI({ baseURL: harness.baseURL, apiKey: 'placeholder', maxRetries: 0, defaultHeaders: { 'X-User-ID': 'mallory' } });
      expect(await refusal(stranger.responses.cancel(running.id))).to.deep.include({ status: 404 });
      expect(await refusal(stranger.responses.retrieve(running.id, { stream: true }))).to.deep.include({ status: 404 });
    });

    it('stops a deleted background response that was still running', async () => {
      const created = await client.responses.create({ model: 'svc-agent', input: slowInput(300), background: true });
      await pollUntil(created.id, (response) => response.status === 'in_progress', 'the turn to start');
      await client.responses.delete(created.id);
      await llm.waitForAbort(() => true, 5_000);
      expect(await refusal(client.responses.retrieve(created.id))).to.deep.include({ status: 404 });
    });
  });
}
