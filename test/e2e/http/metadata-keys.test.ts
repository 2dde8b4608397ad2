import { expect } from 'chai';
import { startTestService, type TestService } from '../../support/service-harness.js';

type ErrorObject = { message: string; type: string; param: string | null };

/** Sends `json` as it is written: a JavaScript object literal cannot hold a `__proto__` key, JSON text can. */
function send(harness: TestService, method: string, path: string, json: string): Promise<Response> {
  return fetch(`${harness.baseURL}${path}`, { method, headers: { 'Content-Type': 'application/json' }, body: json });
}

async function expectRefused(response: Response, param: string): Promise<void> {
  const body = (await response.json()) as { error: ErrorObject };
  expect(response.status, JSON.stringify(body)).to.equal(400);
  expect(body.error).to.include({ type: 'invalid_request_error', param });
  expect(body.error.message).to.include('__proto__');
}

describe('metadata keys that name object internals', () => {
  let harness: TestService;

  before(async () => {
    harness = await startTestService();
  });
  after(async () => harness?.close());

  it('refuses a __proto__ key in the metadata of a response with 400 naming it, instead of dropping it', async () => {
    await expectRefused(await send(harness, 'POST', '/responses', '{"input":"hi","metadata":{"topic":"x","__proto__":"y"}}'), 'metadata.__proto__');
  });

  it('refuses a __proto__ key in the metadata of a new or updated conversation', async () => {
    await expectRefused(await send(harness, 'POST', '/conversations', '{"metadata":{"__proto__":"y"}}'), 'metadata.__proto__');
    const created = await harness.client.conversations.create({ metadata: { topic: 'x' } });
    await expectRefused(await send(harness, 'POST', `/conversations/${created.id}`, '{"metadata":{"__proto__":{"topic":"z"}}}'), 'metadata.__proto__');
    const kept = await harness.client.conversations.retrieve(created.id);
    expect(kept.metadata).to.deep.equal({ topic: 'x' });
  });

  it('stores constructor and prototype as the plain keys they are, and answers them back', async () => {
    const metadata = { constructor: 'c', prototype: 'p', toString: 't' };
    const response = await send(harness, 'POST', '/responses', JSON.stringify({ input: 'hi', metadata }));
    expect(response.status).to.equal(200);
    const { id } = (await response.json()) as { id: string };
    expect((await harness.client.responses.retrieve(id)).metadata).to.deep.equal(metadata);
    const conversation = await send(harness, 'POST', '/conversations', JSON.stringify({ metadata }));
    expect(conversation.status).to.equal(200);
    const { id: conversationId } = (await conversation.json()) as { id: string };
    expect((await harness.client.conversations.retrieve(conversationId)).metadata).to.deep.equal(metadata);
  });
});
