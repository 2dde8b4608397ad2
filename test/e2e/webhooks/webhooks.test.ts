import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { EVERYTHING_STDIO_YAML, mcpDeploymentFile } from '../../support/mcp-fixtures.js';
import { startTestService, type TestService } from '../../support/service-harness.js';
import { waitFor } from '../../support/wait-for.js';
import { WebhookReceiver } from '../../support/webhook-receiver.js';

/** The operator's key: the webhook endpoints always need one. */
const API_KEY = 'sk-webhook-operator';

const SECRET = 'whsec_0123456789abcdef-test';
const SUM_REQUEST = 'Add them up [[tool:everything__get-sum {"a":2,"b":3}]]';

async function api(harness: TestService, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const response = await fetch(`${harness.baseURL}${path}`, {
    method,
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : undefined };
}

async function chat(harness: TestService, sessionId: string, content: string): Promise<void> {
  const response = await fetch(`${harness.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Session-ID': sessionId, Authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify({ messages: [{ role: 'user', content }] }),
  });
  expect(response.status).to.equal(200);
  await response.json();
}

async function deliveries(harness: TestService, webhookId: string): Promise<any[]> {
  const { json } = await api(harness, 'GET', `/webhooks/${webhookId}/deliveries?limit=100`);
  return json.data as any[];
}

describe('Webhooks', function () {
  this.timeout(90_000);

  describe('validation (default policy: https only, no private targets)', () => {
    let harness: TestService;
    before(async () => {
      harness = await startTestService({ env: { API_KEYS: API_KEY } });
    });
    after(async () => {
      await harness?.close();
    });

    it('answers 401 without an API key, and with a wrong one', async () => {
      for (const headers of [{}, { Authorization: 'Bearer sk-wrong' }] as Array<Record<string, string>>) {
        const response = await fetch(`${harness.baseURL}/webhooks`, { headers });
        expect(response.status).to.equal(401);
        expect(((await response.json()) as { error: { type: string } }).error.type).to.equal('authentication_error');
      }
    });

    it('refuses http URLs without webhooks.allow_http', async () => {
      const { status, json } = await api(harness, 'POST', '/webhooks', { url: 'http://93.184.215.14/hook', events: ['*'], secret: SECRET });
      expect(status).to.equal(400);
      expect(json.error.param).to.equal('url');
      expect(json.error.type).to.equal('invalid_request_error');
    });

    it('refuses private, loopback and link-local targets without webhooks.allow_private_targets', async () => {
      for (const url of ['https://127.0.0.1/hook', 'https://10.1.2.3/hook', 'https://169.254.169.254/latest', 'https://[::1]/hook', 'https://localhost/hook']) {
        const { status, json } = await api(harness, 'POST', '/webhooks', { url, events: ['*'], secret: SECRET });
        expect(status, url).to.equal(400);
        expect(json.error.param, url).to.equal('url');
      }
    });

    it('refuses targets on an IPv6 address that carries a private IPv4 address (translated, mapped, compatible, NAT64, 6to4, Teredo)', async () => {
      const urls = [
        'https://[::ffff:0:7f00:1]/hook',
        'https://[::ffff:0:127.0.0.1]/hook',
        'https://[0:0:0:0:ffff::7f00:1]/hook',
        'https://[::ffff:0:a9fe:a9fe]/latest',
        'https://[::ffff:7f00:1]/hook',
        'https://[::a9fe:a9fe]/latest',
        'https://[64:ff9b::a9fe:a9fe]/latest',
        'https://[64:ff9b:1::a9fe:a9fe]/latest',
        'https://[2002:a00:1::1]/hook',
        'https://[2001:0:808:808::5601:5601]/latest',
      ];
      for (const url of urls) {
        const { status, json } = await api(harness, 'POST', '/webhooks', { url, events: ['*'], secret: SECRET });
        expect(status, url).to.equal(400);
        expect(json.error, url).to.include({ type: 'invalid_request_error', param: 'url' });
      }
    });

    it('refuses documentation, benchmarking and reserved targets', async () => {
      const urls = ['192.0.2.1', '198.51.100.1', '203.0.113.1', '[2001:db8::1]', '[2001:2::1]', '[2001:10::1]', '[2001:20::1]'].map((host) => `https://${host}/hook`);
      for (const url of urls) {
        const { status, json } = await api(harness, 'POST', '/webhooks', { url, events: ['*'], secret: SECRET });
        expect(status, url).to.equal(400);
        expect(json.error, url).to.include({ type: 'invalid_request_error', param: 'url' });
        expect(json.error.message, url).to.match(/reserved/);
      }
    });

    it('accepts a public target spelled as an IPv4-translated or NAT64 address, and a public IPv6 target', async () => {
      for (const url of ['https://[::ffff:0:808:808]/hook', 'https://[64:ff9b::808:808]/hook', 'https://[2001:4860:4860::8888]/hook']) {
        const created = await api(harness, 'POST', '/webhooks', { url, events: ['*'], secret: SECRET });
        expect(created.status, url).to.equal(201);
        expect((await api(harness, 'DELETE', `/webhooks/${created.json.id}`)).status, url).to.equal(200);
      }
    });

    it('answers 400 naming after when the deliveries cursor is not one the service gave', async () => {
      const created = await api(harness, 'POST', '/webhooks', { url: 'https://93.184.215.14/hook', events: ['*'], secret: SECRET });
      expect(created.status).to.equal(201);
      const junk = ["' OR 1=1--", 'dlv_000000000000000000000000', '', 'dlv_\u0000', 'x'.repeat(300)];
      for (const after of junk) {
        const { status, json } = await api(harness, 'GET', `/webhooks/${created.json.id}/deliveries?after=${encodeURIComponent(after)}`);
        expect(status, after).to.equal(400);
        expect(json.error, after).to.include({ type: 'invalid_request_error', param: 'after', code: 'invalid_request' });
        expect(json.error.message, after).to.be.a('string').and.match(/after/);
      }
      const repeated = await api(harness, 'GET', `/webhooks/${created.json.id}/deliveries?after=a&after=b`);
      expect(repeated.status).to.equal(400);
      expect(repeated.json.error.param).to.equal('after');
      expect((await api(harness, 'DELETE', `/webhooks/${created.json.id}`)).status).to.equal(200);
    });

    it('refuses unknown event types, empty events and short secrets', async () => {
      const unknown = await api(harness, 'POST', '/webhooks', { url: 'https://93.184.215.14/hook', events: ['agent.exploded'], secret: SECRET });
      expect(unknown.status).to.equal(400);
      expect(unknown.json.error.param).to.equal('events');
      expect((await api(harness, 'POST', '/webhooks', { url: 'https://93.184.215.14/hook', events: [], secret: SECRET })).status).to.equal(400);
      const short = await api(harness, 'POST', '/webhooks', { url: 'https://93.184.215.14/hook', events: ['*'], secret: 'short' });
      expect(short.status).to.equal(400);
      expect(short.json.error.param).to.equal('secret');
    });

    it('creates, reads, lists and deletes a subscription without ever echoing the secret', async () => {
      const created = await api(harness, 'POST', '/webhooks', { url: 'https://93.184.215.14/hook', events: ['agent.created', 'tool.executed'], secret: SECRET });
      expect(created.status).to.equal(201);
      expect(created.json).to.include({ object: 'webhook', url: 'https://93.184.215.14/hook', active: true });
      expect(created.json.id).to.match(/^wh_/);
      const fetched = await api(harness, 'GET', `/webhooks/${created.json.id}`);
      const listed = await api(harness, 'GET', '/webhooks');
      for (const text of [JSON.stringify(created.json), JSON.stringify(fetched.json), JSON.stringify(listed.json)]) {
        expect(text).not.to.include(SECRET);
        expect(text).not.to.include('secret');
      }
      expect(listed.json.data.map((entry: { id: string }) => entry.id)).to.include(created.json.id);
      expect((await api(harness, 'DELETE', `/webhooks/${created.json.id}`)).status).to.equal(200);
      expect((await api(harness, 'GET', `/webhooks/${created.json.id}`)).status).to.equal(404);
    });
  });

  describe('delivery', () => {
    let folder: string;
    let env: NodeJS.ProcessEnv;
    let harness: TestService;
    const receiver = new WebhookReceiver(SECRET);
    let webhookId: string;

    before(async () => {
      folder = mkdtempSync(join(tmpdir(), 'svc-webhooks-'));
      const configFile = mcpDeploymentFile(folder, EVERYTHING_STDIO_YAML);
      env = {
        CONFIG_FILE: configFile,
        API_KEYS: API_KEY,
        DATA_DIR: join(folder, 'data'),
        WEBHOOKS_ALLOW_HTTP: 'true',
        WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
        WEBHOOKS_POLL_MS: '20',
        WEBHOOKS_INITIAL_BACKOFF_MS: '20',
        WEBHOOKS_MAX_BACKOFF_MS: '100',
        WEBHOOKS_MAX_ATTEMPTS: '1000',
        WEBHOOKS_TIMEOUT_MS: '2000',
      };
      await receiver.start();
      harness = await startTestService({ env });
      const created = await api(harness, 'POST', '/webhooks', { url: `http://127.0.0.1:${receiver.port}/hook`, events: ['*'], secret: SECRET });
      expect(created.status).to.equal(201);
      webhookId = created.json.id;
    });
    after(async () => {
      await harness?.close();
      await receiver.stop();
      rmSync(folder, { recursive: true, force: true });
    });
    afterEach(() => {
      expect(receiver.badSignatures, 'every signature verifies').to.deep.equal([]);
    });

    it('delivers a tool-using turn in order, exactly once, through a receiver that fails 3 times first', async () => {
      receiver.failNext = 3;
      await chat(harness, 'wh-agent-1', SUM_REQUEST);
      const log = await waitFor(async () => {
        const rows = await deliveries(harness, webhookId);
        return rows.length > 0 && rows.every((row) => row.status === 'delivered') && rows.some((row) => row.event === 'tool.executed') ? rows : undefined;
      }, 'every delivery delivered', 20_000);

      // The first three attempts were of the same (head) delivery: later ones waited.
      const failures = receiver.received.filter((entry) => entry.answered === 500);
      expect(failures).to.have.length(3);
      expect(new Set(failures.map((entry) => entry.id)).size).to.equal(1);

      const acknowledged = receiver.acknowledged;
      const ids = acknowledged.map((entry) => entry.id);
      expect(new Set(ids).size, 'no duplicate after a success').to.equal(ids.length);
      expect([...ids].sort()).to.deep.equal(log.map((row) => row.id).sort());

      const events = acknowledged.filter((entry) => entry.payload.agent_id === 'wh-agent-1').map((entry) => entry.event);
      expect(events[0]).to.equal('agent.created');
      expect(events[1]).to.equal('agent.state_changed');
      expect(events).to.include('tool.executed');
      expect(events.indexOf('tool.executed')).to.be.greaterThan(1);
      // Arrival order is outbox order.
      expect(ids).to.deep.equal(log.map((row) => row.id).reverse());

      const tool = acknowledged.find((entry) => entry.event === 'tool.executed')!;
      expect(tool.payload.data).to.include({ tool: 'get-sum', server: 'everything', outcome: 'ok' });
      expect(Object.keys(tool.payload)).to.deep.equal(['event', 'timestamp', 'agent_id', 'data', 'signature']);
      expect(tool.timestamp).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      const state = acknowledged.find((entry) => entry.event === 'agent.state_changed')!;
      expect(state.payload.data).to.have.keys(['previous_state', 'current_state', 'transition_reason']);
      expect(tool.headers['x-webhook-id']).to.match(/^dlv_/);
      expect(log.find((row) => row.id === failures[0]!.id)).to.include({ attempts: 4, status: 'delivered' });
    });

    it('redelivers a delivery on request with the same X-Webhook-Id', async () => {
      const [latest] = await deliveries(harness, webhookId);
      const before = receiver.received.length;
      const requeued = await api(harness, 'POST', `/webhooks/${webhookId}/deliveries/${latest.id}/redeliver`);
      expect(requeued.status).to.equal(202);
      expect(requeued.json.status).to.equal('pending');
      await waitFor(() => receiver.received.length > before, 'the redelivery');
      expect(receiver.received.at(-1)!.id).to.equal(latest.id);
      expect(receiver.received.at(-1)!.raw).to.equal(latest.payload);
    });

    it('pages the delivery log', async () => {
      const all = await deliveries(harness, webhookId);
      const first = await api(harness, 'GET', `/webhooks/${webhookId}/deliveries?limit=2`);
      expect(first.json.data).to.have.length(2);
      expect(first.json.has_more).to.equal(true);
      const second = await api(harness, 'GET', `/webhooks/${webhookId}/deliveries?limit=2&after=${first.json.last_id}`);
      expect(second.json.data.map((row: { id: string }) => row.id)).to.deep.equal(all.slice(2, 4).map((row) => row.id));
    });

    it("answers 400 naming after when the deliveries cursor is another subscription's delivery", async () => {
      const [delivery] = await deliveries(harness, webhookId);
      // Inactive, so it takes no deliveries from the other tests.
      const other = await api(harness, 'POST', '/webhooks', { url: `http://127.0.0.1:${receiver.port}/other`, events: ['*'], secret: SECRET, active: false });
      expect(other.status).to.equal(201);
      const { status, json } = await api(harness, 'GET', `/webhooks/${other.json.id}/deliveries?after=${delivery.id}`);
      expect(status).to.equal(400);
      expect(json.error).to.include({ type: 'invalid_request_error', param: 'after' });
      expect((await api(harness, 'DELETE', `/webhooks/${other.json.id}`)).status).to.equal(200);
    });

    it('delivers after a restart what was not delivered before the service stopped', async () => {
      await receiver.stop();
      const before = new Set((await deliveries(harness, webhookId)).map((row) => row.id));
      await chat(harness, 'wh-agent-2', 'hello again');
      await harness.close();
      const seen = receiver.received.length;

      await receiver.start(receiver.port);
      harness = await startTestService({ env });
      const log = await waitFor(async () => {
        const rows = await deliveries(harness, webhookId);
        const fresh = rows.filter((row) => !before.has(row.id));
        return fresh.length > 0 && fresh.every((row) => row.status === 'delivered') ? fresh : undefined;
      }, 'the deliveries of the stopped run', 20_000);
      const arrived = receiver.received.slice(seen).filter((entry) => entry.answered < 300).map((entry) => entry.id);
      expect(arrived).to.include.members(log.map((row) => row.id));
      expect(receiver.received.slice(seen).find((entry) => entry.payload.agent_id === 'wh-agent-2')!.event).to.equal('agent.created');
    });

    it('delivers the events of a Responses API turn as of a chat completion: the session is the agent', async () => {
      const response = await fetch(`${harness.baseURL}/responses`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` },
        body: JSON.stringify({ model: 'svc-agent', input: SUM_REQUEST }),
      });
      expect(response.status).to.equal(200);
      const body = (await response.json()) as { output: Array<{ type: string }> };
      expect(body.output.map((item) => item.type)).to.deep.equal(['mcp_call', 'message']);
      const sessionId = response.headers.get('x-session-id')!;
      const events = await waitFor(() => {
        const seen = receiver.acknowledged.filter((entry) => entry.payload.agent_id === sessionId).map((entry) => entry.event);
        return seen.includes('tool.executed') ? seen : undefined;
      }, 'the Responses API turn delivered', 20_000);
      expect(events.slice(0, 2)).to.deep.equal(['agent.created', 'agent.state_changed']);
    });

    it('announces a conversation created with items as a new agent at once, and an empty one at its first turn, once each', async () => {
      const withItems = await api(harness, 'POST', '/conversations', { items: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello' }] });
      const empty = await api(harness, 'POST', '/conversations', {});
      expect([withItems.status, empty.status]).to.deep.equal([200, 200]);
      const createdFor = (id: string) => receiver.acknowledged.filter((entry) => entry.event === 'agent.created' && entry.payload.agent_id === id);
      await waitFor(() => (createdFor(withItems.json.id).length === 1 ? true : undefined), 'agent.created of the conversation with items', 20_000);
      expect(createdFor(empty.json.id)).to.have.length(0);
      for (const conversation of [withItems.json.id, empty.json.id]) {
        const turn = await api(harness, 'POST', '/responses', { model: 'svc-agent', input: 'Next', conversation });
        expect(turn.status).to.equal(200);
      }
      await waitFor(() => (createdFor(empty.json.id).length === 1 ? true : undefined), 'agent.created of the empty conversation', 20_000);
      await waitFor(async () => ((await deliveries(harness, webhookId)).every((row) => row.status === 'delivered') ? true : undefined), 'every delivery delivered', 20_000);
      expect(createdFor(withItems.json.id)).to.have.length(1);
      expect(createdFor(empty.json.id)).to.have.length(1);
    });

    it('sends nothing while the subscription is deactivated', async () => {
      const off = await api(harness, 'PATCH', `/webhooks/${webhookId}`, { active: false });
      expect(off.status).to.equal(200);
      expect(off.json.active).to.equal(false);
      const before = receiver.received.length;
      const logged = (await deliveries(harness, webhookId)).length;
      await chat(harness, 'wh-agent-3', 'quiet please');
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(receiver.received.length).to.equal(before);
      expect(await deliveries(harness, webhookId)).to.have.length(logged);
      const on = await api(harness, 'PATCH', `/webhooks/${webhookId}`, { active: true });
      expect(on.json.active).to.equal(true);
    });
  });

  describe('ownership (keys bound to users, and an admin key)', () => {
    const keys = { alice: 'sk-alice-owner', bob: 'sk-bob-owner', admin: 'sk-admin-owner' } as const;
    type Who = keyof typeof keys;
    const receivers = { alice: new WebhookReceiver(SECRET), bob: new WebhookReceiver(SECRET), admin: new WebhookReceiver(SECRET) };
    const ids = {} as Record<Who, string>;
    let harness: TestService;

    async function as(who: Who, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
      const response = await fetch(`${harness.baseURL}${path}`, {
        method,
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${keys[who]}` },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      return { status: response.status, json: text ? JSON.parse(text) : undefined };
    }

    before(async () => {
      for (const receiver of Object.values(receivers)) await receiver.start();
      harness = await startTestService({
        env: {
          API_KEYS: `${keys.alice}:alice,${keys.bob}:bob,${keys.admin}`,
          WEBHOOKS_ALLOW_HTTP: 'true',
          WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
          WEBHOOKS_POLL_MS: '20',
        },
      });
      for (const who of ['alice', 'bob', 'admin'] as const) {
        const created = await as(who, 'POST', '/webhooks', { url: `http://127.0.0.1:${receivers[who].port}/hook`, events: ['*'], secret: SECRET });
        expect(created.status).to.equal(201);
        ids[who] = created.json.id;
      }
    });
    after(async () => {
      await harness?.close();
      for (const receiver of Object.values(receivers)) await receiver.stop();
    });

    it("belongs to the user of the key that made it: another user's key can neither list, read, change, delete nor redeliver it", async () => {
      expect((await as('alice', 'GET', `/webhooks/${ids.alice}`)).json.user_id).to.equal('alice');
      expect((await as('bob', 'GET', '/webhooks')).json.data.map((entry: { id: string }) => entry.id)).to.deep.equal([ids.bob]);
      const alices = `/webhooks/${ids.alice}`;
      for (const [method, path, body] of [
        ['GET', alices],
        ['PATCH', alices, { active: false }],
        ['DELETE', alices],
        ['GET', `${alices}/deliveries`],
        ['POST', `${alices}/deliveries/whd_x/redeliver`],
      ] as Array<[string, string, unknown?]>) {
        const answer = await as('bob', method, path, body);
        expect(answer.status, `${method} ${path}`).to.equal(404);
        expect(answer.json.error.type, `${method} ${path}`).to.equal('not_found_error');
      }
      const still = await as('alice', 'GET', alices);
      expect(still.json).to.include({ id: ids.alice, active: true, user_id: 'alice' });
    });

    it('lets an admin key (bound to no user) see and manage every subscription; its own hear every user', async () => {
      const listed = (await as('admin', 'GET', '/webhooks')).json.data as Array<{ id: string; user_id: string | null }>;
      expect(Object.fromEntries(listed.map((entry) => [entry.id, entry.user_id]))).to.deep.equal({ [ids.alice]: 'alice', [ids.bob]: 'bob', [ids.admin]: null });
      expect((await as('admin', 'GET', `/webhooks/${ids.bob}/deliveries`)).status).to.equal(200);
    });

    it("sends a user's events to that user's subscriptions and admin ones, never to another user's", async () => {
      const chat = async (who: 'alice' | 'bob', sessionId: string) => {
        const response = await fetch(`${harness.baseURL}/chat/completions`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-Session-ID': sessionId, Authorization: `Bearer ${keys[who]}` },
          body: JSON.stringify({ messages: [{ role: 'user', content: `hello from ${who} [[error:503]]` }] }),
        });
        expect(response.status).to.equal(200);
        await response.json();
      };
      const aliceSession = `owned-alice-${Date.now()}`;
      const bobSession = `owned-bob-${Date.now()}`;
      // Alice's turn first: by the time bob's events are in the outbox, alice's are too (they are queued in order).
      await chat('alice', aliceSession);
      await chat('bob', bobSession);
      const agentsHeard = (who: Who) => new Set(receivers[who].acknowledged.map((entry) => entry.payload.agent_id));
      await waitFor(() => agentsHeard('bob').has(bobSession) && agentsHeard('alice').has(aliceSession), 'each user hearing their own session');
      await waitFor(() => agentsHeard('admin').has(bobSession) && agentsHeard('admin').has(aliceSession), 'the admin subscription hearing both');
      const outboxOf = async (who: Who) => ((await as('admin', 'GET', `/webhooks/${ids[who]}/deliveries?limit=100`)).json.data as Array<{ agent_id: string | null; event: string }>).map((entry) => entry.agent_id);
      expect(await outboxOf('bob')).to.include(bobSession).and.not.include(aliceSession);
      expect(await outboxOf('alice')).to.include(aliceSession).and.not.include(bobSession);
      expect([...agentsHeard('bob')]).not.to.include(aliceSession);
      expect([...agentsHeard('alice')]).not.to.include(bobSession);
      // The failed LLM call's error.occurred is the user's too.
      const errors = (who: Who) => receivers[who].acknowledged.filter((entry) => entry.payload.event === 'error.occurred').map((entry) => entry.payload.agent_id);
      await waitFor(() => errors('bob').includes(bobSession), "bob hearing his session's error");
      expect(errors('bob')).not.to.include(aliceSession);
    });
  });
});
