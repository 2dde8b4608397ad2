import { expect } from 'chai';
import { bodyTextOf, responseBody, responseUsage, type ResponseFrame } from '../../gateway/responses/responses-format.js';
import type { ResponsesRequest } from '../../gateway/responses/responses-request.js';
import { RESPONSE_BODY_DEFAULTS_JSON, responseBodyOf } from '../../storage/stored-response-body.js';

const ID = 'resp_019ab0c0ffee00112233445566778899aabbccddeeff0011';

/** A response the gateway makes for `request`, completed with one message. */
function completed(request: Partial<ResponsesRequest>, frame: Partial<ResponseFrame> = {}) {
  const output = [{ id: 'msg_1', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Echo: hi', annotations: [], logprobs: [] }] }];
  const usage = responseUsage({ prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 });
  return responseBody({ id: ID, createdAt: 1_795_600_000, request: { model: 'svc-agent', input: 'hi', ...request } as ResponsesRequest, store: true, ...frame }, { status: 'completed', output, usage });
}

/** A body as it was stored from 32fbdd4 to migration 0015: without its id, its status and the fields at their defaults. */
function compactFormOf(body: Record<string, unknown>): Record<string, unknown> {
  const defaults = JSON.parse(RESPONSE_BODY_DEFAULTS_JSON) as Record<string, unknown>;
  return Object.fromEntries(Object.entries(body).filter(([key, value]) => key !== 'id' && key !== 'status' && JSON.stringify(value) !== JSON.stringify(defaults[key])));
}

describe('a stored response body', () => {
  it('is the JSON text the client is sent, with the status beside it for its column', () => {
    const body = completed({ instructions: 'Be brief.' });
    expect(bodyTextOf(body)).to.deep.equal({ status: 'completed', json: JSON.stringify(body) });
  });

  it('holds a lone surrogate as U+FFFD, which PostgreSQL JSON accepts, and a pair as it is', () => {
    const body = completed({ instructions: 'a\ud800b \u{1F600}' });
    expect((JSON.parse(bodyTextOf(body).json) as { instructions: string }).instructions).to.equal('a\uFFFDb \u{1F600}');
  });

  it('reads back whole, as it was made, its fields in the order the gateway makes them', () => {
    const body = completed({ metadata: { topic: 'orders' } });
    const read = responseBodyOf(ID, 'completed', JSON.parse(bodyTextOf(body).json) as Record<string, unknown>);
    expect(read).to.deep.equal(body);
    expect(Object.keys(read)).to.deep.equal(Object.keys(body));
  });

  it('takes its status from the column, which a failed background run sets', () => {
    const body = completed({});
    expect(responseBodyOf(ID, 'failed', JSON.parse(bodyTextOf(body).json) as Record<string, unknown>)).to.deep.include({ status: 'failed' });
  });

  it('reads a body stored without its id, status and defaults back whole, every field a request set kept', () => {
    const body = completed(
      {
        instructions: 'Be brief.',
        max_output_tokens: 64,
        metadata: { topic: 'orders' },
        parallel_tool_calls: false,
        previous_response_id: 'resp_before',
        conversation: 'conv_1',
        temperature: 0,
        top_p: 0.5,
        tool_choice: 'none',
        tools: [{ type: 'function', name: 'lookup', parameters: { type: 'object' } }],
        user: 'u-1',
      } as Partial<ResponsesRequest>,
      { store: false, background: true },
    );
    const read = responseBodyOf(ID, 'completed', compactFormOf(body));
    expect(read).to.deep.equal(body);
    expect(Object.keys(read)).to.deep.equal(Object.keys(body));
    expect(responseBodyOf(ID, 'completed', compactFormOf(completed({})))).to.deep.equal(completed({}));
  });

  it('gives SQL the defaults that a whole body has: a compact body merged over them, with its id and status, is the body', () => {
    const body = completed({ metadata: { a: '1' } });
    const merged = { ...(JSON.parse(RESPONSE_BODY_DEFAULTS_JSON) as object), id: ID, status: body.status, ...compactFormOf(body) };
    expect(merged).to.deep.equal(body);
  });
});
