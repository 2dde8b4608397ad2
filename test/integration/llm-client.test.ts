import { expect } from 'chai';
import { createLlmClient, LlmCallError, type LlmClient } from '../../runtime/llm/llm-client.js';
import { startFakeLlm, type FakeLlm } from '../../scripts/fake-llm-server.js';

const params = { model: 'm', temperature: 0.5, max_tokens: 64 };
const ask = (text: string) => ({ ...params, messages: [{ role: 'user' as const, content: text }] });

async function failure(promise: Promise<unknown>): Promise<LlmCallError> {
  try {
    await promise;
  } catch (error) {
    expect(error).to.be.instanceOf(LlmCallError);
    return error as LlmCallError;
  }
  throw new Error('expected the call to fail');
}

describe('createLlmClient', () => {
  let llm: FakeLlm;
  let client: LlmClient;

  before(async () => {
    llm = await startFakeLlm();
    client = createLlmClient({ baseUrl: llm.url, apiKey: 'k', timeoutMs: 2000 });
  });
  after(async () => {
    await client?.close();
    await llm?.close();
  });
  beforeEach(() => llm.reset());

  it('returns the reply, finish reason and usage when not streaming', async () => {
    const reply = await client.generate(ask('hi'));
    expect(reply).to.deep.include({ content: 'Echo: hi', finishReason: 'stop', toolCalls: [] });
    expect(reply.usage?.total_tokens).to.be.greaterThan(0);
    expect(llm.requests.at(-1)!.body).to.include({ model: 'm', temperature: 0.5, max_tokens: 64 });
    expect(llm.requests.at(-1)!.headers.authorization).to.equal('Bearer k');
  });

  it('hands each piece over as it streams and returns the whole reply', async () => {
    llm.script({ reply: { content: 'a b c', pieces: ['a', ' b', ' c'] } });
    const pieces: string[] = [];
    const reply = await client.generate(ask('x'), { onContent: (piece) => pieces.push(piece) });
    expect(pieces).to.deep.equal(['a', ' b', ' c']);
    expect(reply.content).to.equal('a b c');
    expect(reply.usage?.total_tokens).to.be.greaterThan(0);
  });

  it('reassembles streamed tool calls from their deltas', async () => {
    llm.script({ reply: { toolCalls: [{ id: 'c1', name: 'sum', arguments: { a: 1, b: 2 } }, { id: 'c2', name: 'echo', arguments: { text: 'hey' } }] } });
    const deltas: unknown[] = [];
    const reply = await client.generate(ask('x'), { onToolCallDelta: (delta) => deltas.push(delta) });
    expect(reply.finishReason).to.equal('tool_calls');
    expect(reply.toolCalls.map((call) => [call.id, call.function.name, JSON.parse(call.function.arguments)])).to.deep.equal([
      ['c1', 'sum', { a: 1, b: 2 }],
      ['c2', 'echo', { text: 'hey' }],
    ]);
    expect(deltas.length).to.be.greaterThan(2);
  });

  it('describes an error status with the server message', async () => {
    llm.script({ reply: { error: { status: 503, message: 'overloaded' } } });
    expect((await failure(client.generate(ask('x')))).message).to.equal('503 overloaded');
  });

  it('says the server cannot be reached when nothing listens', async () => {
    const closed = await startFakeLlm();
    const url = closed.url;
    await closed.close();
    const other = createLlmClient({ baseUrl: url, apiKey: 'k', timeoutMs: 2000 });
    expect((await failure(other.generate(ask('x')))).message).to.match(/^cannot reach the LLM server \(ECONNREFUSED\)/);
    await other.close();
  });

  it('gives up after its time-out', async () => {
    llm.script({ reply: { hang: true } });
    const impatient = createLlmClient({ baseUrl: llm.url, apiKey: 'k', timeoutMs: 200 });
    expect((await failure(impatient.generate(ask('x')))).message).to.equal('the LLM server did not answer in time');
    await impatient.close();
  });

  it('cancels the request when the caller aborts, closing the upstream connection', async () => {
    llm.script({ reply: { hang: true } });
    const controller = new AbortController();
    const call = client.generate(ask('x'), { signal: controller.signal, onContent: () => {} });
    const upstream = await llm.waitForRequest();
    controller.abort();
    expect((await failure(call)).message).to.equal('the request was cancelled');
    expect((await llm.waitForAbort((request) => request.seq === upstream.seq, 1000)).aborted).to.equal(true);
  });

  it('fails a stream cut before its end', async () => {
    llm.script({ reply: { content: 'abc', pieces: ['a', 'b', 'c'], cutAfterPieces: 1 } });
    const pieces: string[] = [];
    const error = await failure(client.generate(ask('x'), { onContent: (piece) => pieces.push(piece) }));
    expect(pieces).to.deep.equal(['a']);
    expect(error.message).to.match(/broke|ended before the reply was complete/);
  });
});
