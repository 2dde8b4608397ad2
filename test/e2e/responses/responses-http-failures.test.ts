import { expect } from 'chai';
import type OpenAI from 'openai';
import type { ResponseFailedEvent, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { refusal } from '../../support/openai-answers.js';
import { expectSchema } from '../../support/openai-schema.js';
import { startTestService, type TestService } from '../../support/service-harness.js';
import { waitFor } from '../../support/wait-for.js';

/** The scripted LLM streams two pieces of its answer, then its connection breaks. */
const FAILS_MID_STREAM = 'tell me a long story [[cut:2]]';

describe('the Responses API with llm.failure_mode http', () => {
  let harness: TestService;
  let client: OpenAI;

  before(async () => {
    harness = await startTestService({ env: { LLM_FAILURE_MODE: 'http' } });
    client = harness.client;
  });
  after(async () => {
    await harness?.close();
  });

  /** A stream's events, checked against OpenAI's schema. */
  async function streamed(params: OpenAI.Responses.ResponseCreateParamsStreaming): Promise<ResponseStreamEvent[]> {
    const events: ResponseStreamEvent[] = [];
    for await (const event of await client.responses.create(params)) events.push(event);
    for (const event of events) expectSchema('ResponseStreamEvent', event);
    return events;
  }

  async function countResponses(): Promise<number> {
    const row = await harness.service.database.db.selectFrom('responses').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
    return Number(row.n);
  }

  it('keeps a streamed response whose LLM call failed after the stream began: retrieve shows it failed, as the stream ended', async () => {
    const events = await streamed({ model: 'svc-agent', input: FAILS_MID_STREAM, stream: true });
    expect(events[0]!.type).to.equal('response.created');
    expect(events.filter((event) => event.type === 'response.output_text.delta')).to.have.length.greaterThan(0);
    const failed = events.at(-1) as ResponseFailedEvent;
    expect(failed.type).to.equal('response.failed');
    expect(failed.response.error).to.include({ code: 'server_error' });

    const stored = await client.responses.retrieve(failed.response.id);
    expectSchema('Response', stored);
    expect(stored).to.deep.include({ id: failed.response.id, status: 'failed', error: failed.response.error, output: failed.response.output });
    const items = await client.responses.inputItems.list(failed.response.id);
    expect(items.data.map((item) => (item as { content: Array<{ text: string }> }).content[0]!.text)).to.deep.equal([FAILS_MID_STREAM]);
    // Its session goes on from it.
    const next = await client.responses.create({ model: 'svc-agent', input: 'shorter, please', previous_response_id: failed.response.id });
    expect(next).to.include({ status: 'completed', previous_response_id: failed.response.id });
  });

  it('keeps no response with store: false when its stream failed after it began', async () => {
    const stored = await countResponses();
    const events = await streamed({ model: 'svc-agent', input: FAILS_MID_STREAM, stream: true, store: false });
    const failed = events.at(-1) as ResponseFailedEvent;
    expect(failed.type).to.equal('response.failed');
    expect(await refusal(client.responses.retrieve(failed.response.id))).to.deep.include({ status: 404 });
    expect(await countResponses()).to.equal(stored);
  });

  it('answers a failed turn that sent nothing yet with a 502 and no response id, streamed or not, and keeps no response', async () => {
    const stored = await countResponses();
    const failures = [
      client.responses.create({ model: 'svc-agent', input: 'hello [[error:503]]' }),
      client.responses.create({ model: 'svc-agent', input: 'hello [[error:503]]', stream: true }),
      client.responses.create({ model: 'svc-agent', input: FAILS_MID_STREAM }),
    ];
    for (const failure of failures) expect(await refusal(failure)).to.deep.include({ status: 502, type: 'upstream_error' });
    expect(await countResponses()).to.equal(stored);
  });

  it('fails a background response whose LLM call failed: retrieve shows it failed with the error', async () => {
    const created = await client.responses.create({ model: 'svc-agent', input: 'hello [[error:503]]', background: true });
    const ended = await waitFor(async () => {
      const response = await client.responses.retrieve(created.id);
      return response.status === 'queued' || response.status === 'in_progress' ? undefined : response;
    }, 'the background response to end');
    expectSchema('Response', ended);
    expect(ended.status).to.equal('failed');
    expect(ended.error?.message).to.match(/503/);
  });
});
