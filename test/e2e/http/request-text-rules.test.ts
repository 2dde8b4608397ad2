import { connect } from 'node:net';
import { expect } from 'chai';
import { expectSchema } from '../../support/openai-schema.js';
import { startTestService, type TestService } from '../../support/service-harness.js';

const API_KEY = 'sk-text-rules';

type ErrorObject = { message: string; type: string; param: string | null; code: string | null };

/** A request to the service's API with the key; a string body is sent as it is. */
function call(harness: TestService, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${harness.baseURL}${path}`, {
    method,
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}`, ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** Expects a 400 `invalid_request_error` in the OpenAI shape naming `param`; returns the error. */
async function expectRefused(response: Response, param: string): Promise<ErrorObject> {
  const body = (await response.json()) as { error: ErrorObject };
  expect(response.status, JSON.stringify(body)).to.equal(400);
  expectSchema('ErrorResponse', body);
  expect(body.error).to.include({ type: 'invalid_request_error', param });
  return body.error;
}

/** Sends raw bytes (headers as Latin-1, as a client that writes them unencoded does) and answers the status, head and body. */
function exchange(port: number, raw: string): Promise<{ status: number; head: string; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(Buffer.from(raw, 'latin1')));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', () => {
      const [head, body] = Buffer.concat(chunks).toString('latin1').split('\r\n\r\n');
      resolve({ status: Number(head!.split(' ')[1]), head: head!, body: body ?? '' });
    });
    socket.on('error', reject);
  });
}

/** A raw chat completion request with `X-Session-ID: <sessionId>`, its header bytes as given. */
function rawChat(sessionId: string): string {
  const body = JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] });
  return (
    `POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${API_KEY}\r\nContent-Type: application/json\r\n` +
    `X-Session-ID: ${sessionId}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
}

describe('the text rules every request is held to', () => {
  let harness: TestService;

  before(async () => {
    harness = await startTestService({ env: { API_KEYS: API_KEY } });
  });
  after(async () => harness?.close());
  beforeEach(() => harness.llm.reset());

  describe('NUL in the path or the query', () => {
    const routes: Array<[string, string]> = [
      ['GET', '/responses/resp_%00'],
      ['GET', '/responses/resp_%00?stream=true'],
      ['GET', '/responses/resp_%00/input_items'],
      ['POST', '/responses/resp_%00/cancel'],
      ['DELETE', '/responses/resp_%00'],
      ['GET', '/conversations/conv_%00/items'],
      ['GET', '/webhooks/wh_%00/deliveries'],
    ];
    for (const [method, path] of routes) {
      it(`answers 400 naming the path, not a database error, to ${method} ${path}`, async () => {
        const error = await expectRefused(await call(harness, method, path), 'path');
        expect(error.message).to.match(/NUL/);
      });
    }

    it('answers 400 naming the query parameter when its value holds a NUL', async () => {
      await expectRefused(await call(harness, 'GET', '/responses/resp_1/input_items?after=msg_%00'), 'after');
      await expectRefused(await call(harness, 'GET', '/agents?user_id=a%00b'), 'user_id');
    });
  });

  describe('NUL or a lone surrogate anywhere in a JSON body', () => {
    it('answers 400 naming a webhook secret that holds a NUL', async () => {
      const body = { url: 'https://93.184.215.14/hook', events: ['*'], secret: 'whsec_0123456789\u0000abcdef' };
      await expectRefused(await call(harness, 'POST', '/webhooks', body), 'secret');
    });

    const chatCases: Array<[string, Record<string, unknown>]> = [
      ['model', { model: 'svc\u0000agent', messages: [{ role: 'user', content: 'x' }] }],
      ['messages[0].name', { messages: [{ role: 'user', name: 'a\u0000b', content: 'x' }] }],
      ['messages[0].content[0].text', { messages: [{ role: 'user', content: [{ type: 'text', text: 'a\u0000b' }] }] }],
      ['tools[0].function.description', { messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'function', function: { name: 'f', description: 'a\u0000b' } }] }],
      ...(['id', 'function.name', 'function.arguments'] as const).map((field): [string, Record<string, unknown>] => {
        const call = { id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{}' } } as Record<string, any>;
        if (field === 'id') call.id = 'call\u00001';
        else call.function[field.slice('function.'.length)] = field === 'function.name' ? 'look\u0000up' : '{"q":"a\u0000b"}';
        const messages = [{ role: 'user', content: 'x' }, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: 'call_1', content: 'r' }, { role: 'user', content: 'y' }];
        return [`messages[1].tool_calls[0].${field}`, { messages }];
      }),
      ['messages[0].content', { messages: [{ role: 'user', content: 'a\ud800b' }] }],
    ];
    for (const [param, body] of chatCases) {
      it(`answers a chat completion 400 naming ${param} and never calls the LLM`, async () => {
        const error = await expectRefused(await call(harness, 'POST', '/chat/completions', body), param);
        expect(error.message).to.match(/NUL|surrogate/);
        expect(harness.llm.requests).to.have.length(0);
      });
    }

    it('answers 400 naming a key that holds a NUL', async () => {
      await expectRefused(await call(harness, 'POST', '/conversations', { metadata: { 'a\u0000b': 'x' } }), 'metadata.a\u0000b');
    });

    it('answers 400 naming a lone surrogate in a Responses API or Conversations API body', async () => {
      await expectRefused(await call(harness, 'POST', '/responses', { input: 'x', metadata: { note: '\udc00' } }), 'metadata.note');
      await expectRefused(await call(harness, 'POST', '/conversations', { items: [{ role: 'user', content: 'a\ud83db' }] }), 'items[0].content');
    });

    it('accepts surrogate pairs (emoji) and other Unicode text', async () => {
      const response = await call(harness, 'POST', '/chat/completions', { messages: [{ role: 'user', name: 'zoë', content: 'Grüße 😀' }] });
      expect(response.status).to.equal(200);
      const body = (await response.json()) as { choices: Array<{ message: { content: string } }> };
      expect(body.choices[0]!.message.content).to.equal('Echo: Grüße 😀');
    });
  });

  describe('X-Session-ID', () => {
    it('answers the session id a client named back byte for byte', async () => {
      const answer = await exchange(harness.service.port, rawChat('my-session_1.A~'));
      expect(answer.status).to.equal(200);
      expect(answer.head).to.match(/\r\nX-Session-ID: my-session_1\.A~\r\n/i);
    });

    it('answers 400 naming X-Session-ID to a Latin-1 session id, which could not be sent back as it came', async () => {
      const answer = await exchange(harness.service.port, rawChat('caf\u00e9'));
      expect(answer.status).to.equal(400);
      const { error } = JSON.parse(answer.body) as { error: ErrorObject };
      expect(error).to.include({ type: 'invalid_request_error', param: 'X-Session-ID' });
      expect(error.message).to.match(/printable ASCII/);
      expect(harness.llm.requests).to.have.length(0);
    });

    it('answers 400 naming X-Session-ID to a session id holding a tab', async () => {
      const answer = await exchange(harness.service.port, rawChat('a\tb'));
      expect(answer.status).to.equal(400);
      expect((JSON.parse(answer.body) as { error: ErrorObject }).error.param).to.equal('X-Session-ID');
    });

    it('holds the Responses API and the other routes to the same rule', async () => {
      await expectRefused(await call(harness, 'POST', '/responses', { input: 'hi' }, { 'X-Session-ID': 'caf\u00e9' }), 'X-Session-ID');
      await expectRefused(await call(harness, 'GET', '/conversations/conv_1', undefined, { 'X-Session-ID': 'a\tb' }), 'X-Session-ID');
    });

    it('holds the body session_id of a chat completion to the same rule', async () => {
      await expectRefused(await call(harness, 'POST', '/chat/completions', { session_id: 'caf\u00e9', messages: [{ role: 'user', content: 'x' }] }), 'session_id');
      await expectRefused(await call(harness, 'POST', '/chat/completions', { session_id: 'a\tb', messages: [{ role: 'user', content: 'x' }] }), 'session_id');
    });
  });
});
