import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import express from 'express';
import { DEFAULT_CONFIG_FILE, loadConfig } from '../../../config/load-config.js';
import { loadGraph } from '../../../config/load-graph.js';
import { createErrorHandler } from '../../../gateway/http/error-handler.js';
import { createInspectRoutes, type InspectedSession, type InspectRoutes } from '../../../gateway/inspect/inspect-routes.js';
import { EventBus, type RuntimeEventName, type RuntimeEvents } from '../../../runtime/observability/event-bus.js';
import type { ConversationStore, SessionStore } from '../../../runtime/ports.js';
import { createSessionRegistry } from '../../../runtime/sessions/session-registry.js';
import { startTestService, testLogger, type TestService } from '../../support/service-harness.js';
import { waitFor } from '../../support/wait-for.js';

type ErrorBody = { error: { message: string; type: string; code: string | null; param: string | null } };
type Frame = { type: string; session_id: string; user_id?: string; [field: string]: unknown };

/** An open `/inspect/events` stream: the frames and comment lines read so far. */
type EventStream = { frames: Frame[]; comments: string[]; ended: boolean; close(): void };

async function openEvents(url: string, headers: Record<string, string> = {}): Promise<EventStream> {
  const aborter = new AbortController();
  const response = await fetch(url, { headers, signal: aborter.signal });
  expect(response.status).to.equal(200);
  expect(response.headers.get('content-type')).to.match(/^text\/event-stream/);
  const stream: EventStream = { frames: [], comments: [], ended: false, close: () => aborter.abort() };
  void (async () => {
    let buffer = '';
    try {
      for await (const chunk of response.body!.pipeThrough(new TextDecoderStream())) {
        buffer += chunk;
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (frame.startsWith(':')) stream.comments.push(frame);
          else if (frame.startsWith('data: ')) stream.frames.push(JSON.parse(frame.slice('data: '.length)) as Frame);
        }
      }
    } catch {
      // Aborted by the test.
    }
    stream.ended = true;
  })();
  return stream;
}

async function expectError(response: Response, status: number, code: string): Promise<ErrorBody> {
  expect(response.status).to.equal(status);
  const body = (await response.json()) as ErrorBody;
  expect(body.error.code).to.equal(code);
  expect(body.error.message).to.be.a('string').that.is.not.empty;
  return body;
}

async function chat(harness: TestService, key: string, sessionId: string, content: string, userId?: string): Promise<void> {
  const response = await fetch(`${harness.baseURL}/chat/completions`, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Authorization: `Bearer ${key}`,
      'X-Session-ID': sessionId,
      ...(userId ? { 'X-User-ID': userId } : {}),
    },
    body: JSON.stringify({ model: 'svc-default', messages: [{ role: 'user', content }] }),
  });
  expect(response.status).to.equal(200);
  await response.json();
}

const DATA_ROUTES = ['/inspect/sessions', '/inspect/settings', '/inspect/graph.svg', '/inspect/events'];

describe('inspector routes (/inspect)', () => {
  describe('with API_KEYS', () => {
    let harness: TestService;
    const admin = { Authorization: 'Bearer admin-key' };
    const alice = { Authorization: 'Bearer alice-key' };
    before(async () => {
      harness = await startTestService({ env: { API_KEYS: 'admin-key, alice-key:alice' } });
    });
    after(async () => harness?.close());

    it('serves the page shell, its script and its style without a key, loading nothing from elsewhere', async () => {
      for (const [path, type] of [
        ['/inspect', 'text/html'],
        ['/inspect/', 'text/html'],
        ['/inspect/inspect.js', 'javascript'],
        ['/inspect/inspect.css', 'text/css'],
      ] as const) {
        const response = await fetch(`${harness.service.url}${path}`);
        expect(response.status, path).to.equal(200);
        expect(response.headers.get('content-type'), path).to.include(type);
        expect(response.headers.get('content-security-policy'), path).to.match(/default-src 'none'/);
        expect(await response.text(), path).not.to.match(/https?:\/\//);
      }
    });

    it('refuses every data route without a key (missing_api_key) and with a wrong one (invalid_api_key)', async () => {
      for (const path of DATA_ROUTES) {
        await expectError(await fetch(`${harness.service.url}${path}`), 401, 'missing_api_key');
        await expectError(await fetch(`${harness.service.url}${path}`, { headers: { Authorization: 'Bearer wrong' } }), 401, 'invalid_api_key');
      }
    });

    it('names no trace address in its settings when inspect.trace_url is empty', async () => {
      const response = await fetch(`${harness.service.url}/inspect/settings`, { headers: admin });
      expect(await response.json()).to.deep.equal({ trace_url: null });
    });

    it('lists live sessions with their state, and a user-bound key only its own', async () => {
      await chat(harness, 'admin-key', 'listed-bob', 'hello', 'bob');
      await chat(harness, 'alice-key', 'listed-alice', 'hello');

      const all = (await (await fetch(`${harness.service.url}/inspect/sessions`, { headers: admin })).json()) as { data: InspectedSession[] };
      const bob = all.data.find((session) => session.id === 'listed-bob');
      expect(bob).to.include({ user_id: 'bob', state: 'ask_user', status: 'waiting_for_input', live: true, transitions: 1 });
      expect(all.data.map((session) => session.id)).to.include('listed-alice');

      const own = (await (await fetch(`${harness.service.url}/inspect/sessions`, { headers: alice })).json()) as { data: InspectedSession[] };
      expect(own.data.map((session) => session.id)).to.deep.equal(['listed-alice']);
    });

    it('serves the state graph as SVG with an element per state', async () => {
      const response = await fetch(`${harness.service.url}/inspect/graph.svg`, { headers: admin });
      expect(response.status).to.equal(200);
      expect(response.headers.get('content-type')).to.include('image/svg+xml');
      const svg = await response.text();
      for (const state of ['ask_user', 'agent_reply', 'use_tool']) expect(svg).to.include(`data-state="${state}"`);
    });

    it("streams a session's state changes, turn end and stored messages as server-sent events", async () => {
      const stream = await openEvents(`${harness.service.url}/inspect/events?session_id=streamed`, admin);
      try {
        await waitFor(() => stream.comments.length > 0, 'the first comment line');
        await chat(harness, 'admin-key', 'streamed', 'watch me');
        await waitFor(() => stream.frames.some((frame) => frame.type === 'turn:completed' && frame.outcome === 'ok'), 'turn:completed');
        const changed = stream.frames.find((frame) => frame.type === 'session:state_changed');
        expect(changed).to.include({ session_id: 'streamed', from: 'agent_reply', to: 'ask_user', reason: 'reply' });
        expect(changed?.at).to.be.a('string');
        await waitFor(() => stream.frames.some((frame) => frame.type === 'memory:written' && frame.kind === 'conversation'), 'memory:written');
        expect(stream.frames.every((frame) => frame.session_id === 'streamed')).to.equal(true);
      } finally {
        stream.close();
      }
    });

    it("does not stream another user's events to a user-bound key", async () => {
      const stream = await openEvents(`${harness.service.url}/inspect/events`, alice);
      try {
        await waitFor(() => stream.comments.length > 0, 'the first comment line');
        await chat(harness, 'admin-key', 'streamed-bob', 'not for alice', 'bob');
        await chat(harness, 'alice-key', 'streamed-alice', 'for alice');
        await waitFor(() => stream.frames.some((frame) => frame.type === 'turn:completed'), "alice's turn:completed");
        expect(stream.frames.map((frame) => frame.session_id)).to.satisfy((ids: string[]) => ids.every((id) => id === 'streamed-alice'));
      } finally {
        stream.close();
      }
    });

    it("answers 404 for another user's session and 400 for a bad session_id", async () => {
      await chat(harness, 'admin-key', 'bobs-own', 'hi', 'bob');
      await expectError(await fetch(`${harness.service.url}/inspect/events?session_id=bobs-own`, { headers: alice }), 404, 'not_found');
      const tooLong = await expectError(await fetch(`${harness.service.url}/inspect/events?session_id=${'x'.repeat(256)}`, { headers: admin }), 400, 'invalid_request');
      expect(tooLong.error.param).to.equal('session_id');
      await expectError(await fetch(`${harness.service.url}/inspect/events?session_id=a&session_id=b`, { headers: admin }), 400, 'invalid_request');
    });
  });

  describe('with INSPECT_TRACE_URL', () => {
    it('gives the page the address where a call\'s trace opens', async () => {
      const harness = await startTestService({ env: { INSPECT_TRACE_URL: 'http://jaeger.internal:16686/trace/{trace_id}' } });
      try {
        const response = await fetch(`${harness.service.url}/inspect/settings`);
        expect(await response.json()).to.deep.equal({ trace_url: 'http://jaeger.internal:16686/trace/{trace_id}' });
      } finally {
        await harness.close();
      }
    });
  });

  describe('closing the service', () => {
    it('ends the open event streams, so the service can close', async () => {
      const harness = await startTestService();
      const stream = await openEvents(`${harness.service.url}/inspect/events`);
      await harness.close();
      await waitFor(() => stream.ended, 'the stream to end');
    });
  });

  describe('with INSPECT_PAGE=false', () => {
    let harness: TestService;
    before(async () => {
      harness = await startTestService({ env: { API_KEYS: 'admin-key', INSPECT_PAGE: 'false' } });
    });
    after(async () => harness?.close());

    it('answers 404 for everything under /inspect, with a key or without', async () => {
      for (const path of ['/inspect', '/inspect/', '/inspect/inspect.js', ...DATA_ROUTES]) {
        await expectError(await fetch(`${harness.service.url}${path}`), 404, 'not_found');
        await expectError(await fetch(`${harness.service.url}${path}`, { headers: { Authorization: 'Bearer admin-key' } }), 404, 'not_found');
      }
    });
  });

  describe('event streams', () => {
    /** An event bus that counts the listeners attached to it. */
    class CountingBus extends EventBus {
      listeners = 0;
      override on<Name extends RuntimeEventName>(name: Name, listener: (payload: RuntimeEvents[Name]) => void): () => void {
        this.listeners += 1;
        const off = super.on(name, listener);
        return () => {
          this.listeners -= 1;
          off();
        };
      }
    }

    let server: Server;
    let routes: InspectRoutes;
    let url: string;
    const bus = new CountingBus();
    before(async () => {
      routes = createInspectRoutes({
        enabled: true,
        registry: createSessionRegistry(),
        // Streams without a user-bound key never read the sessions or their messages.
        sessions: {} as SessionStore,
        conversations: {} as ConversationStore,
        events: bus,
        graph: loadGraph(loadConfig({ CONFIG_FILE: DEFAULT_CONFIG_FILE }).state.graph_path).graph,
        authenticate: (_req, _res, next) => next(),
        traceUrl: '',
        history: { transitions: (_req, _res, next) => next(), messages: (_req, _res, next) => next(), calls: (_req, _res, next) => next() },
        recentSessions: 10,
        keepAliveMs: 20,
      });
      const app = express().use('/inspect', routes.router).use(createErrorHandler(testLogger()));
      server = app.listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/inspect/events`;
    });
    after(async () => {
      routes.close();
      await new Promise((resolve) => server.close(resolve));
    });

    it('sends keep-alive comment lines on a quiet stream', async () => {
      const stream = await openEvents(url);
      try {
        await waitFor(() => stream.comments.length >= 3, 'three keep-alive comment lines');
        expect(stream.comments.every((comment) => comment === ': keep-alive')).to.equal(true);
        expect(stream.frames).to.deep.equal([]);
      } finally {
        stream.close();
      }
    });

    it('detaches the listeners of a client that goes away', async () => {
      const before = bus.listeners;
      const stream = await openEvents(url);
      await waitFor(() => routes.openStreams === 1, 'the stream to open');
      expect(bus.listeners).to.be.greaterThan(before);
      stream.close();
      await waitFor(() => routes.openStreams === 0 && bus.listeners === before, 'the listeners to be detached');
    });
  });
});
