import { randomInt } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { Pool } from 'undici';
import { freePort } from '../support/mcp-fixtures.js';
import { startTestProvider, type TestProvider } from '../support/oidc-test-provider.js';
import { startTestService, type TestService } from '../support/service-harness.js';
import { waitFor } from '../support/wait-for.js';
import { openFaultDatabase, type FaultDatabase } from './fault-database.js';
import { fuzzCase, type FuzzCase, type FuzzTargets } from './fuzz-cases.js';
import { SeededRandom } from './seeded-random.js';

/** How many malformed requests one run sends; FUZZ_CASES and FUZZ_SEED replay or widen a run. */
const CASES = Number(process.env.FUZZ_CASES ?? 1200);
const SEED = Number(process.env.FUZZ_SEED ?? randomInt(2 ** 31));
const CONCURRENCY = 16;
const BODY_LIMIT_BYTES = 64 * 1024;
const API_KEY = 'fuzz-key';
const BOUND_KEY = 'bound-key';
const BOUND_USER = 'bound-user';

/** What is wrong with one answer, or null when it is acceptable: never a 5xx, every 4xx in the OpenAI error shape. */
function problemWith(method: string, status: number, contentType: string, text: string): string | null {
  if (status >= 500) return `status ${status}`;
  if (status < 400 || method === 'HEAD') return null;
  if (!contentType.startsWith('application/json')) return `status ${status} with content type '${contentType}'`;
  let error: Record<string, unknown> | undefined;
  try {
    error = (JSON.parse(text) as { error?: Record<string, unknown> }).error;
  } catch {
    return `status ${status} with a body that is not JSON`;
  }
  if (!error || typeof error.message !== 'string' || typeof error.type !== 'string') return `status ${status} without error.message and error.type`;
  for (const key of ['param', 'code'] as const) {
    if (!(key in error) || !(error[key] === null || typeof error[key] === 'string')) return `status ${status} whose error.${key} is not a string or null`;
  }
  return null;
}

describe(`fuzzed malformed requests (FUZZ_SEED=${SEED})`, function () {
  this.timeout(120_000);
  let provider: TestProvider;
  let harness: TestService;
  let pool: Pool;
  let exportDir: string;
  let database: FaultDatabase;
  let targets: FuzzTargets;

  before(async () => {
    database = await openFaultDatabase('fuzz');
    exportDir = mkdtempSync(join(tmpdir(), 'svc-fuzz-exports-'));
    const port = await freePort();
    const publicUrl = `http://127.0.0.1:${port}`;
    provider = await startTestProvider({ redirectUri: `${publicUrl}/auth/idp/callback`, accessTokenTtlS: 300 });
    harness = await startTestService({
      env: {
        APP_PORT: String(port),
        ...database.env,
        APP_PUBLIC_URL: publicUrl,
        APP_BODY_LIMIT: `${BODY_LIMIT_BYTES}b`,
        API_KEYS: `${API_KEY},${BOUND_KEY}:${BOUND_USER}`,
        AGENTS_EXPORT_DIR: exportDir,
        OAUTH_ISSUER_URL: provider.issuer,
        OAUTH_CLIENT_ID: provider.clientId,
        OAUTH_CLIENT_SECRET: provider.clientSecret,
        OAUTH_REDIRECT_URL: `${publicUrl}/auth/idp/callback`,
        OAUTH_TOKEN_KEY: Buffer.alloc(32, 7).toString('base64'),
        OAUTH_ALLOW_INSECURE: 'true',
        // Subscriptions to a local port are accepted, so fuzzed ones get past the URL check; deliveries fail at once.
        WEBHOOKS_ALLOW_HTTP: 'true',
        WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
        WEBHOOKS_MAX_ATTEMPTS: '1',
      },
    });
    pool = new Pool(harness.service.url, { connections: CONCURRENCY });
    targets = await seedTargets();
  });
  after(async () => {
    await pool?.close();
    await harness?.close();
    await provider?.close();
    await database?.drop();
    rmSync(exportDir, { recursive: true, force: true });
  });

  async function call(method: string, path: string, body?: unknown, key = API_KEY): Promise<{ status: number; json: Record<string, unknown> }> {
    const response = await pool.request({
      method: method as 'GET',
      path,
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.statusCode, json: (await response.body.json()) as Record<string, unknown> };
  }

  /** Ids that exist, so that part of the fuzzed requests reach the stores: two agents, a webhook, its deliveries. */
  async function seedTargets(): Promise<FuzzTargets> {
    const webhook = await call('POST', '/v1/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['*'], secret: 'a-secret-of-twenty-chars' });
    expect(webhook.status).to.equal(201);
    const webhookId = webhook.json.id as string;
    const agentIds: string[] = [];
    // The third agent's id is as long as an id may be (its export file name must still fit); ids are printable ASCII.
    for (const [key, sessionId] of [[API_KEY], [BOUND_KEY], [API_KEY, 'u'.repeat(255)]] as Array<[string, string?]>) {
      const response = await pool.request({
        method: 'POST',
        path: '/v1/chat/completions',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'seed' }], ...(sessionId ? { session_id: sessionId } : {}) }),
      });
      await response.body.dump();
      expect(response.statusCode).to.equal(200);
      agentIds.push(String(response.headers['x-session-id']));
    }
    const deliveries = await waitFor(async () => {
      const { json } = await call('GET', `/v1/webhooks/${webhookId}/deliveries`);
      const ids = (json.data as Array<{ id: string }>).map((delivery) => delivery.id);
      return ids.length > 0 ? ids : null;
    }, 'webhook deliveries of the seed chats');
    return {
      apiKey: API_KEY,
      boundKey: BOUND_KEY,
      boundUser: BOUND_USER,
      agentIds,
      webhookIds: [webhookId],
      deliveryIds: deliveries,
      bodyLimitBytes: BODY_LIMIT_BYTES,
    };
  }

  /** Sends one case; what is wrong with its answer, or null. */
  async function send(fuzz: FuzzCase): Promise<string | null> {
    try {
      const response = await pool.request({
        method: fuzz.method as 'GET',
        path: fuzz.path,
        headers: fuzz.headers,
        body: fuzz.body,
        headersTimeout: 15_000,
        bodyTimeout: 15_000,
      });
      const text = await response.body.text();
      const problem = problemWith(fuzz.method, response.statusCode, String(response.headers['content-type'] ?? ''), text);
      return problem && `${problem}: ${text.slice(0, 300)}`;
    } catch (error) {
      return `no answer: ${error instanceof Error ? error.message : String(error)}`;
    }
  }

  it('answers 400 to the requests earlier fuzz runs found answered with 500', async () => {
    const chat = (body: unknown) => JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], ...(body as object) });
    const nested = `${'['.repeat(5000)}${']'.repeat(5000)}`;
    const found: FuzzCase[] = [
      { label: 'malformed percent escape in a path parameter', method: 'GET', path: '/v1/agents/%zz', headers: {} },
      { label: 'percent escape of a lone surrogate', method: 'DELETE', path: '/v1/webhooks/%ED%A0%80', headers: {} },
      { label: 'gzip body that is not gzip', method: 'POST', path: '/v1/chat/completions', headers: { 'Content-Encoding': 'gzip' }, body: chat({}) },
      { label: 'NUL in a webhook id', method: 'GET', path: '/v1/webhooks/a%00b', headers: {} },
      { label: 'NUL in a delivery cursor', method: 'GET', path: `/v1/webhooks/${targets.webhookIds[0]}/deliveries?after=%00`, headers: {} },
      { label: 'agents cursor past the last Date', method: 'GET', path: `/v1/agents?after=${Buffer.from('8640000000000001').toString('base64url')}`, headers: {} },
      { label: 'deeply nested extra field of a message', method: 'POST', path: '/v1/chat/completions', headers: {}, body: `{"messages":[{"role":"user","content":"hi","extra":${nested}}]}` },
      { label: 'session id that cannot go in a header', method: 'POST', path: '/v1/chat/completions', headers: {}, body: chat({ session_id: 'line\r\nbreak 😀' }) },
      { label: 'agents cursor whose session id holds NUL', method: 'GET', path: '/v1/agents?after=MToA', headers: {} },
      { label: 'agents cursor whose session id is too long', method: 'GET', path: `/v1/agents?after=${Buffer.from(`1:${'x'.repeat(256)}`).toString('base64url')}`, headers: {} },
      { label: 'lone surrogate in a message (its reply could not be stored)', method: 'POST', path: '/v1/chat/completions', headers: {}, body: '{"messages":[{"role":"user","content":"a \\ud800 b"}]}' },
      { label: 'lone surrogate in the user id', method: 'POST', path: '/v1/chat/completions', headers: {}, body: '{"user_id":"\\udfff","messages":[{"role":"user","content":"hi"}]}' },
      { label: 'deeply nested user_id from a key bound to a user', method: 'POST', path: '/auth/idp/disconnect', headers: { Authorization: `Bearer ${targets.boundKey}` }, body: `{"user_id":${nested}}` },
    ];
    for (const fuzz of found) {
      const response = await pool.request({
        method: fuzz.method as 'GET',
        path: fuzz.path,
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}`, ...fuzz.headers },
        body: fuzz.body,
      });
      const text = await response.body.text();
      expect(response.statusCode, `${fuzz.label}: ${text}`).to.equal(400);
      expect(problemWith(fuzz.method, response.statusCode, String(response.headers['content-type']), text), fuzz.label).to.equal(null);
    }
  });

  it('deletes with an export agents whose ids are as long as an id may be, and refuses multi-byte ids from the start', async () => {
    for (const sessionId of ['é'.repeat(255), `${'ÿ'.repeat(200)}-${'x'.repeat(54)}`]) {
      // An id comes back in X-Session-ID, where only printable ASCII survives: refused, nothing stored.
      const refused = await pool.request({
        method: 'POST',
        path: '/v1/chat/completions',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` },
        body: JSON.stringify({ session_id: sessionId, messages: [{ role: 'user', content: 'a long name' }] }),
      });
      expect(refused.statusCode).to.equal(400);
      expect(((await refused.body.json()) as { error: { param: string } }).error.param).to.equal('session_id');
    }
    for (const sessionId of ['e'.repeat(255), `${'y'.repeat(200)}-${'x'.repeat(54)}`]) {
      const seed = await pool.request({
        method: 'POST',
        path: '/v1/chat/completions',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` },
        body: JSON.stringify({ session_id: sessionId, messages: [{ role: 'user', content: 'a long name' }] }),
      });
      expect(seed.statusCode, await seed.body.text()).to.equal(200);
      const deletion = await call('DELETE', `/v1/agents/${encodeURIComponent(sessionId)}`, { export_data: true });
      expect(deletion.status, JSON.stringify(deletion.json)).to.equal(200);
      expect(deletion.json).to.include({ status: 'deleted', memory_exported: true });
      const exported = JSON.parse(readFileSync(String(deletion.json.export_location), 'utf8')) as { agent: { id: string } };
      expect(exported.agent.id).to.equal(sessionId);
    }
  });

  it(`answers ${CASES} malformed requests with 4xx errors in the OpenAI shape, never a 5xx, and still serves afterwards`, async () => {
    const random = new SeededRandom(SEED);
    const cases = Array.from({ length: CASES }, () => fuzzCase(random, targets));
    const problems: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < cases.length) {
          const index = next++;
          const fuzz = cases[index]!;
          const problem = await send(fuzz);
          if (problem) problems.push(`#${index} ${fuzz.label}: ${fuzz.method} ${fuzz.path.slice(0, 100)} -> ${problem}`);
        }
      }),
    );
    expect(problems, `FUZZ_SEED=${SEED} FUZZ_CASES=${CASES}; ${problems.length} bad answers, first ones:\n${problems.slice(0, 15).join('\n')}\n`).to.deep.equal([]);

    const completion = await harness.client.chat.completions.create(
      { model: 'svc-agent', messages: [{ role: 'user', content: 'still there?' }] },
      { headers: { Authorization: `Bearer ${API_KEY}` } },
    );
    expect(completion.choices[0]!.message.content).to.equal('Echo: still there?');
    expect((await call('GET', '/health')).json).to.include({ status: 'ok', llm_server: 'running' });
  });
});
