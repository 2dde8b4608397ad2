import { expect } from 'chai';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createLlmClient, LlmCallError } from '../../runtime/llm/llm-client.js';
import { retryAfterMs } from '../../runtime/llm/upstream-retries.js';

/** What the test server does with the next chat request: answer, refuse busy, or drop the connection unanswered. */
type Plan = { status: 200 } | { status: 429 | 503; retryAfter?: string } | { drop: true };

const completion = {
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1,
  model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', content: 'fine' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
};

/** An OpenAI-compatible server that plays a list of plans, one per chat request, and counts connections. */
async function startServer(plans: Plan[]) {
  const sockets = new Set<Socket>();
  const seen: string[] = [];
  /** The connection each chat request came on, by its number among the connections. */
  const connectionOf: number[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      if (req.url !== '/v1/chat/completions') {
        res.writeHead(404).end();
        return;
      }
      const plan = plans.shift() ?? { status: 200 };
      connectionOf.push([...sockets].indexOf(req.socket));
      seen.push('drop' in plan ? 'drop' : String(plan.status));
      if ('drop' in plan) {
        // As a server whose idle time-out closed the kept-alive connection the request came on.
        req.socket.destroy();
        return;
      }
      if (plan.status !== 200) {
        res.writeHead(plan.status, { 'content-type': 'application/json', ...(plan.retryAfter ? { 'retry-after': plan.retryAfter } : {}) });
        res.end(JSON.stringify({ error: { message: 'busy', type: 'server_error', param: null, code: null } }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion));
    });
  });
  server.on('connection', (socket) => sockets.add(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return {
    url,
    seen,
    connectionOf,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const ask = { model: 'm', temperature: 0, max_tokens: 16, messages: [{ role: 'user' as const, content: 'hi' }] };

describe('LLM calls sent again', () => {
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  afterEach(async () => server?.close());

  it('waits out a Retry-After on 429 and 503 and answers with the call that got through', async () => {
    server = await startServer([{ status: 429, retryAfter: '0' }, { status: 503, retryAfter: '0' }, { status: 200 }]);
    const client = createLlmClient({ baseUrl: server.url, apiKey: 'k', timeoutMs: 5000, maxRetries: 2 });
    const reply = await client.generate(ask);
    expect(reply.content).to.equal('fine');
    expect(server.seen).to.deep.equal(['429', '503', '200']);
    await client.close();
  });

  it('gives the busy answer to the caller once the retries are spent', async () => {
    server = await startServer([{ status: 503, retryAfter: '0' }, { status: 503, retryAfter: '0' }, { status: 503, retryAfter: '0' }]);
    const client = createLlmClient({ baseUrl: server.url, apiKey: 'k', timeoutMs: 5000, maxRetries: 2 });
    const error = await client.generate(ask).catch((caught: unknown) => caught);
    expect(error).to.be.instanceOf(LlmCallError);
    expect((error as Error).message).to.equal('503 busy');
    expect(server.seen).to.have.length(3);
    await client.close();
  });

  it('does not send again a busy answer without Retry-After, or with one longer than it waits', async () => {
    for (const busy of [{ status: 503 as const }, { status: 429 as const, retryAfter: '60' }]) {
      server = await startServer([busy]);
      const client = createLlmClient({ baseUrl: server.url, apiKey: 'k', timeoutMs: 5000, maxRetries: 2 });
      const error = await client.generate(ask).catch((caught: unknown) => caught);
      expect((error as Error).message).to.equal(`${busy.status} busy`);
      expect(server.seen).to.deep.equal([String(busy.status)]);
      await client.close();
      await server.close();
    }
    server = undefined;
  });

  it('sends again, on a new connection, a call lost on a kept-alive connection the server had just closed', async () => {
    server = await startServer([{ status: 200 }, { drop: true }, { status: 200 }]);
    // One connection: the second call goes on the first's, kept alive.
    const client = createLlmClient({ baseUrl: server.url, apiKey: 'k', timeoutMs: 5000, maxRetries: 2, maxConnections: 1 });
    await client.generate(ask);
    const reply = await client.generate(ask);
    expect(reply.content).to.equal('fine');
    expect(server.seen).to.deep.equal(['200', 'drop', '200']);
    // The lost call came on the first call's connection; the one sent again on another.
    expect(server.connectionOf[1]).to.equal(server.connectionOf[0]);
    expect(server.connectionOf[2]).to.not.equal(server.connectionOf[1]);
    await client.close();
  });

  it('sends each call once with no retries allowed', async () => {
    server = await startServer([{ drop: true }]);
    const client = createLlmClient({ baseUrl: server.url, apiKey: 'k', timeoutMs: 5000, maxRetries: 0 });
    const error = await client.generate(ask).catch((caught: unknown) => caught);
    expect((error as Error).message).to.match(/^the connection to the LLM server broke/);
    expect(server.seen).to.deep.equal(['drop']);
    await client.close();
  });
});

describe('retryAfterMs', () => {
  it('reads seconds and HTTP dates, and nothing else', () => {
    expect(retryAfterMs('2')).to.equal(2000);
    expect(retryAfterMs('0.5')).to.equal(500);
    expect(retryAfterMs(new Date(10_000).toUTCString(), 4000)).to.equal(6000);
    expect(retryAfterMs(undefined)).to.equal(undefined);
    expect(retryAfterMs('soon')).to.equal(undefined);
  });
});
