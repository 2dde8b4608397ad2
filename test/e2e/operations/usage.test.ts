import { expect } from 'chai';
import { startTestService, type TestService } from '../../support/service-harness.js';

type UsageTotals = { sessions: number; prompt_tokens: number; completion_tokens: number; total_tokens: number };
type UsageBody = UsageTotals & {
  object: 'usage';
  user_id: string | null;
  start_time: number | null;
  end_time: number | null;
  by_model: Array<UsageTotals & { model: string }>;
  by_user?: Array<UsageTotals & { user_id: string }>;
};
type ErrorBody = { error: { type: string; code: string; param: string | null; message: string } };

const ADMIN = { Authorization: 'Bearer admin-key' };
const ALICE = { Authorization: 'Bearer alice-key' };
const BOB = { Authorization: 'Bearer bob-key' };

describe('GET /v1/usage', () => {
  let harness: TestService;
  /** Unix seconds just before the sessions were made. */
  let startedAt: number;

  async function usage(query: string, headers: Record<string, string>): Promise<{ status: number; body: UsageBody & ErrorBody }> {
    const response = await fetch(`${harness.baseURL}/usage${query}`, { headers });
    return { status: response.status, body: (await response.json()) as UsageBody & ErrorBody };
  }

  async function chat(headers: Record<string, string>, content: string): Promise<void> {
    const response = await fetch(`${harness.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content }] }),
    });
    expect(response.status).to.equal(200);
    await response.arrayBuffer();
  }

  before(async () => {
    harness = await startTestService({ env: { API_KEYS: 'admin-key, alice-key:alice, bob-key:bob' } });
    harness.llm.script(
      { match: { lastUserIncludes: 'alice counts' }, reply: { content: 'ok', usage: { prompt_tokens: 100, completion_tokens: 10 } } },
      { match: { lastUserIncludes: 'bob counts' }, reply: { content: 'ok', usage: { prompt_tokens: 7, completion_tokens: 3 } } },
    );
    startedAt = Math.floor(Date.now() / 1000);
    await chat(ALICE, 'alice counts');
    await chat(BOB, 'bob counts');
  });
  after(async () => harness?.close());

  it('answers an admin key that names no user with every user\'s tokens, in all and by user', async () => {
    const { status, body } = await usage('', ADMIN);
    expect(status).to.equal(200);
    expect(body).to.include({ object: 'usage', user_id: null, sessions: 2, prompt_tokens: 107, completion_tokens: 13, total_tokens: 120 });
    expect(body.by_user).to.deep.equal([
      { user_id: 'alice', sessions: 1, prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 },
      { user_id: 'bob', sessions: 1, prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
    ]);
  });

  it('answers an admin key for the one user it names', async () => {
    const { body } = await usage('?user_id=bob', ADMIN);
    expect(body).to.include({ user_id: 'bob', sessions: 1, total_tokens: 10 });
    expect(body).not.to.have.property('by_user');
  });

  it('answers a key bound to a user for that user only', async () => {
    const { body } = await usage('', ALICE);
    expect(body).to.include({ user_id: 'alice', sessions: 1, total_tokens: 110 });
    expect(body).not.to.have.property('by_user');
    expect((await usage('?user_id=bob', ALICE)).status).to.equal(403);
  });

  it('counts the sessions active in a window of Unix seconds, and none outside it', async () => {
    const during = await usage(`?start_time=${startedAt - 60}&end_time=${startedAt + 3600}`, ADMIN);
    expect(during.body).to.include({ start_time: startedAt - 60, end_time: startedAt + 3600, sessions: 2, total_tokens: 120 });
    const own = await usage(`?start_time=${startedAt - 60}`, ALICE);
    expect(own.body).to.include({ user_id: 'alice', start_time: startedAt - 60, end_time: null, sessions: 1, total_tokens: 110 });
    const before = await usage(`?start_time=${startedAt - 7200}&end_time=${startedAt - 3600}`, ADMIN);
    expect(before.body).to.include({ sessions: 0, total_tokens: 0 });
    expect(before.body.by_user).to.deep.equal([]);
    const later = await usage(`?start_time=${startedAt + 3600}`, ALICE);
    expect(later.body).to.include({ user_id: 'alice', sessions: 0, total_tokens: 0 });
  });

  it('refuses a window that is not whole Unix seconds, or ends before it starts (400 naming the parameter)', async () => {
    for (const [query, param] of [
      ['?start_time=yesterday', 'start_time'],
      ['?end_time=1.5', 'end_time'],
      ['?start_time=-1', 'start_time'],
      [`?start_time=${startedAt}&end_time=${startedAt}`, 'end_time'],
    ] as const) {
      const { status, body } = await usage(query, ADMIN);
      expect(status, query).to.equal(400);
      expect(body.error, query).to.include({ type: 'invalid_request_error', param });
    }
  });
});
