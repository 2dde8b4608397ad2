import { expect } from 'chai';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { ClientAnswerRelay } from '../../../gateway/mcp/client-answer-relay.js';
import { mcpServerSdk, type McpServerSdk } from '../../../gateway/mcp/mcp-server-sdk.js';
import type { NotificationChannel } from '../../../runtime/ports.js';

/** A channel that reaches every relay subscribed to it, as NOTIFY reaches every process. */
function sharedChannel(): NotificationChannel & { published: string[] } {
  const listeners = new Set<(payload: string) => void>();
  const published: string[] = [];
  return {
    published,
    async publish(payload) {
      published.push(payload);
      for (const listener of listeners) listener(payload);
    },
    async subscribe(onPayload) {
      listeners.add(onPayload);
      return async () => {
        listeners.delete(onPayload);
      };
    },
  };
}

/** A transport that records what it sends and what it is handed. */
function fakeTransport(): Transport & { sent: JSONRPCMessage[]; received: JSONRPCMessage[] } {
  const sent: JSONRPCMessage[] = [];
  const received: JSONRPCMessage[] = [];
  return {
    sent,
    received,
    start: async () => undefined,
    close: async () => undefined,
    send: async (message) => {
      sent.push(message);
    },
    onmessage: (message) => {
      received.push(message);
    },
  };
}

const ELICIT = { jsonrpc: '2.0', id: 0, method: 'elicitation/create', params: { message: 'May it?', requestedSchema: { type: 'object', properties: {} } } } as const;

describe('ClientAnswerRelay', () => {
  let sdk: McpServerSdk;
  before(async () => {
    sdk = await mcpServerSdk.load();
  });

  it("sends the server's requests under service-wide ids and hands the answer back under the request's own", async () => {
    const relay = new ClientAnswerRelay(sdk);
    const transport = fakeTransport();
    relay.attach(transport, 'session-1', []);
    await transport.send(ELICIT);
    await transport.send({ ...ELICIT, id: 0 });
    const [first, second] = transport.sent as Array<{ id: string }>;
    expect(first!.id).to.match(/^svc-/);
    expect(second!.id).to.not.equal(first!.id);
    await relay.route('session-1', { jsonrpc: '2.0', id: first!.id, result: { action: 'accept' } });
    expect(transport.received).to.deep.equal([{ jsonrpc: '2.0', id: 0, result: { action: 'accept' } }]);
  });

  it('carries an answer to the relay of another process over the channel', async () => {
    const channel = sharedChannel();
    const asking = new ClientAnswerRelay(sdk, channel);
    const receiving = new ClientAnswerRelay(sdk, channel);
    await asking.start();
    await receiving.start();
    const transport = fakeTransport();
    asking.attach(transport, 'session-1', []);
    await transport.send(ELICIT);
    const { id } = transport.sent[0] as { id: string };
    await receiving.route('session-1', { jsonrpc: '2.0', id, result: { action: 'decline' } });
    expect(channel.published).to.have.length(1);
    expect(transport.received).to.deep.equal([{ jsonrpc: '2.0', id: 0, result: { action: 'decline' } }]);
    await asking.close();
    await receiving.close();
  });

  it('carries a cancellation to the request it names, in its MCP session only', async () => {
    const relay = new ClientAnswerRelay(sdk);
    const transport = fakeTransport();
    relay.attach(transport, 'session-1', [7]);
    const cancel = { jsonrpc: '2.0' as const, method: 'notifications/cancelled' as const, params: { requestId: 7, reason: 'timed out' } };
    await relay.route('session-2', cancel);
    expect(transport.received).to.deep.equal([]);
    await relay.route('session-1', cancel);
    expect(transport.received).to.deep.equal([cancel]);
  });

  it('delivers nothing from another MCP session, nor once the request is over', async () => {
    const relay = new ClientAnswerRelay(sdk);
    const transport = fakeTransport();
    const detach = relay.attach(transport, 'session-1', []);
    await transport.send(ELICIT);
    const { id } = transport.sent[0] as { id: string };
    await relay.route('session-2', { jsonrpc: '2.0', id, result: {} });
    expect(transport.received).to.deep.equal([]);
    detach();
    await relay.route('session-1', { jsonrpc: '2.0', id, result: {} });
    expect(transport.received).to.deep.equal([]);
  });

  it('tells answers and cancellations from the other messages of a client', () => {
    const relay = new ClientAnswerRelay(sdk);
    expect(relay.isFollowUp({ jsonrpc: '2.0', id: 'svc-1', result: {} })).to.equal(true);
    expect(relay.isFollowUp({ jsonrpc: '2.0', id: 'svc-1', error: { code: -1, message: 'no' } })).to.equal(true);
    expect(relay.isFollowUp({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } })).to.equal(true);
    expect(relay.isFollowUp({ jsonrpc: '2.0', method: 'notifications/initialized' })).to.equal(false);
    expect(relay.isFollowUp({ jsonrpc: '2.0', id: 1, method: 'tools/list' })).to.equal(false);
  });
});
