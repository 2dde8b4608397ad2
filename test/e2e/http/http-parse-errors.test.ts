import { connect } from 'node:net';
import { expect } from 'chai';
import { expectSchema } from '../../support/openai-schema.js';
import { startTestService, type TestService } from '../../support/service-harness.js';

/** Sends raw bytes to the service and reads what comes back until it closes the connection. */
function exchange(port: number, raw: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(raw));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.on('error', reject);
  });
}

/** The status and the JSON body of a raw HTTP answer. */
function parse(answer: string): { status: number; contentType: string; body: { error: Record<string, unknown> } } {
  const [head, body] = answer.split('\r\n\r\n');
  const status = Number(head!.split(' ')[1]);
  const contentType = /content-type: ([^\r\n]+)/i.exec(head!)?.[1] ?? '';
  return { status, contentType, body: JSON.parse(body!) as { error: Record<string, unknown> } };
}

describe('requests the HTTP parser refuses', () => {
  let harness: TestService;

  before(async () => {
    harness = await startTestService();
  });
  after(async () => {
    await harness?.close();
  });

  it('answers headers over the limit with 431 in the OpenAI error shape', async () => {
    const big = 'x'.repeat(8_000);
    const raw = `POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nX-A: ${big}\r\nX-B: ${big}\r\nX-C: ${big}\r\nContent-Length: 2\r\n\r\n{}`;
    const answer = parse(await exchange(harness.service.port, raw));
    expect(answer.status).to.equal(431);
    expect(answer.contentType).to.match(/^application\/json/);
    expectSchema('ErrorResponse', answer.body);
    expect(answer.body.error).to.deep.include({ type: 'invalid_request_error', param: null, code: 'headers_too_large' });
    expect(answer.body.error.message).to.be.a('string');
  });

  it('answers bytes that are not HTTP with 400 in the OpenAI error shape, and keeps serving', async () => {
    const answer = parse(await exchange(harness.service.port, 'NOT HTTP AT ALL\r\n\r\n'));
    expect(answer.status).to.equal(400);
    expectSchema('ErrorResponse', answer.body);
    expect(answer.body.error).to.deep.include({ type: 'invalid_request_error', code: 'bad_request' });
    const health = await fetch(`${harness.service.url}/health`);
    expect(health.status).to.equal(200);
  });
});
