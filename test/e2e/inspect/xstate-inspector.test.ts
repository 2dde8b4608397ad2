import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { WebSocketServer, type WebSocket } from 'ws';
import { ConfigError } from '../../../config/load-config.js';
import { createXStateInspector } from '../../../runtime/observability/xstate-inspector.js';
import { freePort } from '../../../scripts/bench/child-process.js';
import { startTestService, type TestService } from '../../support/service-harness.js';
import { waitFor } from '../../support/wait-for.js';

/** One message an XState inspector receives (the Stately format), as much as the tests read. */
type InspectorMessage = {
  type: string;
  sessionId: string;
  event?: { type: string };
  snapshot?: { value?: unknown; context?: { sessionId?: string } };
};

/** A WebSocket server standing in for an XState inspector: it keeps what it receives. */
type InspectorServer = { url: string; messages: InspectorMessage[]; close(): Promise<void> };

async function startInspectorServer(port = 0): Promise<InspectorServer> {
  const server = new WebSocketServer({ port, host: '127.0.0.1' });
  await once(server, 'listening');
  const messages: InspectorMessage[] = [];
  server.on('connection', (socket: WebSocket) => {
    socket.on('message', (data: Buffer) => messages.push(JSON.parse(data.toString('utf8')) as InspectorMessage));
  });
  return {
    url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`,
    messages,
    close: async () => {
      for (const client of server.clients) client.close();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The XState session id of the actor of our session `sessionId`, once the inspector has seen it created. */
function actorOf(inspector: InspectorServer, sessionId: string): string | undefined {
  return inspector.messages.find((message) => message.type === '@xstate.actor' && message.snapshot?.context?.sessionId === sessionId)?.sessionId;
}

async function chat(harness: TestService, sessionId: string, content: string): Promise<string | null> {
  const completion = await harness.client.chat.completions.create(
    { model: 'svc-default', messages: [{ role: 'user', content }] },
    { headers: { 'X-Session-ID': sessionId } },
  );
  return completion.choices[0]!.message.content;
}

describe('XState inspector (inspect.websocket_url)', () => {
  const servers: InspectorServer[] = [];
  const harnesses: TestService[] = [];
  afterEach(async () => {
    for (const harness of harnesses.splice(0)) await harness.close();
    for (const server of servers.splice(0)) await server.close();
  });

  it("sends the session actor's @xstate.actor, @xstate.event and @xstate.snapshot events", async () => {
    const inspector = await startInspectorServer();
    servers.push(inspector);
    const harness = await startTestService({ env: { INSPECT_WEBSOCKET_URL: inspector.url } });
    harnesses.push(harness);

    expect(await chat(harness, 'inspected', 'first')).to.equal('Echo: first');
    expect(await chat(harness, 'inspected', 'second')).to.equal('Echo: second');

    const actor = await waitFor(() => actorOf(inspector, 'inspected'), 'the @xstate.actor event of the session');
    const ofActor = () => inspector.messages.filter((message) => message.sessionId === actor);
    await waitFor(() => ofActor().some((message) => message.type === '@xstate.event' && message.event?.type === 'user.message'), 'the user.message event');
    await waitFor(
      () => ofActor().some((message) => message.type === '@xstate.snapshot' && message.snapshot?.value === 'agent_reply'),
      'a snapshot in agent_reply',
    );
    await waitFor(
      () => ofActor().some((message) => message.type === '@xstate.snapshot' && message.snapshot?.value === 'ask_user'),
      'a snapshot in ask_user',
    );
  });

  it('answers turns while the inspector is unreachable, and delivers the held events once it is up', async () => {
    const port = await freePort();
    const harness = await startTestService({ env: { INSPECT_WEBSOCKET_URL: `ws://127.0.0.1:${port}` } });
    harnesses.push(harness);

    expect(await chat(harness, 'before-inspector', 'nobody listens')).to.equal('Echo: nobody listens');

    const inspector = await startInspectorServer(port);
    servers.push(inspector);
    await waitFor(() => actorOf(inspector, 'before-inspector'), 'the held @xstate.actor event after reconnecting', 20_000);
  });

  it('refuses a URL that is not ws:// or wss:// at start-up', async () => {
    const refusal = (url: string) => createXStateInspector({ url, autoStart: false }).then(() => undefined, (error: unknown) => error);
    const notWebSocket = await refusal('http://127.0.0.1:8080');
    expect(notWebSocket).to.be.instanceOf(ConfigError);
    expect((notWebSocket as Error).message).to.match(/ws:\/\/ or wss:\/\//);
    expect(await refusal('localhost:8080')).to.be.instanceOf(ConfigError);
  });
});
