import { expect } from 'chai';
import { responseBody, responseUsage, type ResponseFrame } from '../../gateway/responses-format.js';
import type { ResponsesRequest } from '../../gateway/responses-request.js';
import { RESPONSE_BODY_DEFAULTS_JSON, responseBodyOf, storedResponseBody } from '../../storage/stored-response-body.js';

const ID = 'resp_019ab0c0ffee00112233445566778899aabbccddeeff0011';

/** A response the gateway makes for `request`, completed with one message. */
function completed(request: Partial<ResponsesRequest>, frame: Partial<ResponseFrame> = {}) {
  const output = [{ id: 'msg_1', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Echo: hi', annotations: [], logprobs: [] }] }];
  const usage = responseUsage({ prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 });
  return responseBody({ id: ID, createdAt: 1_795_600_000, request: { model: 'svc-agent', input: 'hi', ...request } as ResponsesRequest, store: true, ...frame }, { status: 'completed', output, usage });
}

/** A body as the column keeps it, then as a reader gets it back. */
const roundTrip = (body: Record<string, unknown> & { status: string }) => responseBodyOf(ID, body.status, JSON.parse(storedResponseBody(body)) as Record<string, unknown>);

describe('the stored form of a response body', () => {
  it('leaves out the id, the status (columns of the row) and every field at its default: what a turn made, the model and the instructions stay', () => {
    const stored = JSON.parse(storedResponseBody(completed({ instructions: 'Be brief.' }))) as Record<string, unknown>;
    expect(Object.keys(stored)).to.deep.equal(['created_at', 'instructions', 'model', 'output', 'usage']);
  });

  it('reads back a response made with every default as it was made, its fields in the order the gateway makes them', () => {
    const body = completed({});
    const read = roundTrip(body);
    expect(read).to.deep.equal(body);
    expect(Object.keys(read)).to.deep.equal(Object.keys(body));
  });

  it('keeps every field a request set, even where it looks like a default of another field', () => {
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
    const stored = JSON.parse(storedResponseBody(body)) as Record<string, unknown>;
    expect(stored).to.include({ temperature: 0, parallel_tool_calls: false, store: false, background: true, previous_response_id: 'resp_before' });
    expect(roundTrip(body)).to.deep.equal(body);
  });

  it('reads back a failed response with its error, and a body stored whole as it was', () => {
    const failed = responseBody({ id: ID, createdAt: 1, request: { model: 'm', input: 'hi' } as ResponsesRequest, store: true }, { status: 'failed', output: [], error: { code: 'server_error', message: 'LLM down' } });
    expect(roundTrip(failed)).to.deep.equal(failed);
    expect(responseBodyOf(ID, 'failed', JSON.parse(JSON.stringify(failed)) as Record<string, unknown>)).to.deep.equal(failed);
  });

  it('gives SQL the defaults that a whole body has: a stored body merged over them is the body read back', () => {
    const body = completed({ metadata: { a: '1' } });
    const merged = { ...(JSON.parse(RESPONSE_BODY_DEFAULTS_JSON) as object), id: ID, status: body.status, ...(JSON.parse(storedResponseBody(body)) as object) };
    expect(merged).to.deep.equal(body);
  });
});
