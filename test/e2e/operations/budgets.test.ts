import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import OpenAI from 'openai';
import type { RecordedRequest, ScriptRule } from '../../../scripts/fake-llm-server.js';
import { EVERYTHING_STDIO_YAML } from '../../support/mcp-fixtures.js';
import { expectSchema } from '../../support/openai-schema.js';
import { parsePrometheusText, sampleValue, type PrometheusSample } from '../../support/prometheus-text.js';
import { rejection } from '../../support/rejection.js';
import { startTestService, type TestService } from '../../support/service-harness.js';
import { serviceStorageTargets } from '../../support/service-storage.js';
import { waitFor } from '../../support/wait-for.js';
import { WebhookReceiver } from '../../support/webhook-receiver.js';

/** An admin key (bound to no user): it acts as the user named in X-User-ID and reads /v1/usage and /metrics. */
const ADMIN_KEY = 'admin-key';
const AS_ADMIN = { Authorization: `Bearer ${ADMIN_KEY}` };
const WEBHOOK_SECRET = 'whsec_budgets-0123456789abcdef';

/** The scripted LLM's answers, chosen by a marker in the user's message, each with the usage it reports. */
const FIFTY = '[fifty]';
const NINETY_NINE = '[ninety-nine]';
const THOUSAND = '[thousand]';
const LOOP = '[loop]';
const SUM_CALL = { name: 'everything__get-sum', arguments: { a: 2, b: 3 } };
const RULES: ScriptRule[] = [
  { match: { lastUserIncludes: FIFTY }, reply: { content: 'fifty tokens', usage: { prompt_tokens: 40, completion_tokens: 10 } } },
  { match: { lastUserIncludes: NINETY_NINE }, reply: { content: 'ninety-nine tokens', usage: { prompt_tokens: 60, completion_tokens: 39 } } },
  { match: { lastUserIncludes: THOUSAND }, reply: { content: 'a thousand tokens', usage: { prompt_tokens: 600, completion_tokens: 400 } } },
  // A model that never stops calling a real tool: only a budget (or the tool rounds' limit, 5) ends the turn.
  { match: { lastUserIncludes: LOOP }, reply: { toolCalls: [SUM_CALL], usage: { prompt_tokens: 40, completion_tokens: 10 } } },
];

type BudgetJson = { budget: string; limit: number; used: number | null; remaining: number | null; resets_at: number | null };
type UsageJson = { user_id: string | null; sessions: number; prompt_tokens: number; completion_tokens: number; total_tokens: number; budgets?: BudgetJson[] };
type QuotaError = { message: string; type: string; param: string | null; code: string | null; budget: string; limit: number; used: number; resets_at: number };

/** The next UTC midnight after `ms`, in Unix seconds. */
function nextMidnight(ms: number): number {
  const at = new Date(ms);
  return Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1) / 1000;
}

/** The first of the month after `ms` (UTC), in Unix seconds. */
function nextMonth(ms: number): number {
  const at = new Date(ms);
  return Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1) / 1000;
}

/** The values `reset` gives for the instants from `startedAt` to now (one, unless a midnight passed meanwhile). */
function resetsSince(startedAt: number, reset: (ms: number) => number): number[] {
  return [...new Set([reset(startedAt), reset(Date.now())])];
}

/** The text of the last user message of an LLM call. */
function lastUserText(request: RecordedRequest): string {
  return String(request.body.messages?.filter((message) => message.role === 'user').at(-1)?.content ?? '');
}

/** The tool results an LLM call was sent. */
function toolResultsOf(request: RecordedRequest): string[] {
  return (request.body.messages ?? []).filter((message) => message.role === 'tool').map((message) => String(message.content));
}

/** A counter's value, 0 before its first increment. */
function count(samples: PrometheusSample[], name: string, labels: Record<string, string>): number {
  return sampleValue(samples, name, labels) ?? 0;
}

/** What a budget refusal of `budget` counts on /metrics. */
function refusals(budget: string, refused: 'request' | 'llm_call'): [string, Record<string, string>] {
  return ['budget_refusals_total', { budget, refused }];
}

/** Helpers over one running service, as its users and operator use it. */
class ServiceUser {
  constructor(readonly harness: TestService) {}

  /** The official client as `userId` (through the admin key), with `maxRetries` as given. */
  client(maxRetries = 0): OpenAI {
    return new OpenAI({ baseURL: this.harness.baseURL, apiKey: ADMIN_KEY, maxRetries });
  }

  /** One chat turn of `userId` through the official client, in a new session. */
  chat(userId: string, content: string, options: { sessionId?: string; maxRetries?: number } = {}): Promise<OpenAI.Chat.ChatCompletion> {
    return this.client(options.maxRetries).chat.completions.create(
      { model: 'svc-agent', messages: [{ role: 'user', content: `${userId}: ${content}` }] },
      { headers: { 'X-User-ID': userId, ...(options.sessionId ? { 'X-Session-ID': options.sessionId } : {}) } },
    );
  }

  /** One chat turn of `userId` over plain fetch: the raw answer. */
  post(userId: string, content: string, extra: Record<string, unknown> = {}): Promise<Response> {
    return fetch(`${this.harness.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { ...AS_ADMIN, 'Content-Type': 'application/json', 'X-User-ID': userId },
      body: JSON.stringify({ model: 'svc-agent', messages: [{ role: 'user', content: `${userId}: ${content}` }], ...extra }),
    });
  }

  /** GET /v1/usage for `userId`, as the operator. */
  async usage(userId: string): Promise<UsageJson> {
    const response = await fetch(`${this.harness.baseURL}/usage?user_id=${encodeURIComponent(userId)}`, { headers: AS_ADMIN });
    expect(response.status).to.equal(200);
    return (await response.json()) as UsageJson;
  }

  async scrape(): Promise<PrometheusSample[]> {
    const response = await fetch(`${this.harness.service.url}/metrics`, { headers: AS_ADMIN });
    expect(response.status).to.equal(200);
    return parsePrometheusText(await response.text());
  }

  /** The LLM calls made for `userId`'s turns (each message names its user). */
  llmCallsOf(userId: string): RecordedRequest[] {
    return this.harness.llm.requests.filter((request) => request.kind === 'chat' && lastUserText(request).startsWith(`${userId}: `));
  }

  /** The `user_token_usage` rows of `userId`. */
  async tokenRows(userId: string): Promise<Array<{ prompt_tokens: number; completion_tokens: number }>> {
    const rows = await this.harness.service.database.db.selectFrom('user_token_usage').select(['prompt_tokens', 'completion_tokens']).where('user_id', '=', userId).execute();
    // bigint columns: the pg driver returns them as text, PGlite as numbers.
    return rows.map((row) => ({ prompt_tokens: Number(row.prompt_tokens), completion_tokens: Number(row.completion_tokens) }));
  }

  /** What a session left in the database: its row and its conversation rows. */
  async storedOf(sessionId: string): Promise<{ sessions: number; conversations: number }> {
    const db = this.harness.service.database.db;
    const sessions = await db.selectFrom('sessions').select('session_id').where('session_id', '=', sessionId).execute();
    const conversations = await db.selectFrom('conversations').select('id').where('session_id', '=', sessionId).execute();
    return { sessions: sessions.length, conversations: conversations.length };
  }
}

/** Checks an openai client error as OpenAI's answer to a spent quota; returns its error object. */
function expectQuotaError(error: unknown, budget: string, limit: number, startedAt: number): QuotaError {
  expect(error).to.be.instanceOf(OpenAI.RateLimitError);
  const refusal = error as InstanceType<typeof OpenAI.RateLimitError>;
  expect(refusal.status).to.equal(429);
  expect(refusal.type).to.equal('insufficient_quota');
  expect(refusal.code).to.equal('insufficient_quota');
  expect(refusal.headers.get('x-should-retry')).to.equal('false');
  const body = refusal.error as QuotaError;
  expect(body).to.include({ budget, limit, type: 'insufficient_quota', code: 'insufficient_quota' });
  expect(body.used).to.be.at.least(limit);
  const reset = budget === 'tokens_per_day' ? nextMidnight : nextMonth;
  expect(resetsSince(startedAt, reset)).to.include(body.resets_at);
  return body;
}

/** Spends `userId`'s day budget of 100 with two turns of 50 tokens, checking each was answered and counted. */
async function spendDay(user: ServiceUser, userId: string): Promise<void> {
  for (let turn = 0; turn < 2; turn += 1) {
    const completion = await user.chat(userId, `turn ${turn} ${FIFTY}`);
    expect(completion.choices[0]!.message.content).to.equal('fifty tokens');
    expect(completion.usage).to.include({ prompt_tokens: 40, completion_tokens: 10, total_tokens: 50 });
  }
}

/** Writes a deployment file of `yaml` in `folder`; returns its path. */
function deploymentFile(folder: string, yaml: string): string {
  const path = join(folder, 'deployment.yaml');
  writeFileSync(path, yaml);
  return path;
}

for (const target of serviceStorageTargets()) {
  describe(`token budgets, end to end (${target.name})`, function () {
    this.timeout(60_000);

    describe('a default day budget of 100 and a turn budget of 120 (BUDGETS_TOKENS_PER_DAY, BUDGETS_TOKENS_PER_TURN), with a real tool server', () => {
      let storage: { env: NodeJS.ProcessEnv; cleanup(): Promise<void> };
      let folder: string;
      let harness: TestService;
      let user: ServiceUser;
      const receiver = new WebhookReceiver(WEBHOOK_SECRET);
      let webhookId: string;

      before(async () => {
        storage = await target.prepare();
        folder = mkdtempSync(join(tmpdir(), 'svc-budgets-'));
        // The users' own entries: each replaces only the keys it sets, the rest stays the environment's default.
        const yaml = [
          'mcp_servers:',
          EVERYTHING_STDIO_YAML,
          'budgets:',
          '  users:',
          '    monthly-user: { tokens_per_month: 1000 }',
          '    loop-user: { tokens_per_day: 0 }',
          '    hook-loop-user: { tokens_per_day: 0 }',
          '    loop-day-user: { tokens_per_turn: 0 }',
          '',
        ].join('\n');
        await receiver.start();
        harness = await startTestService({
          env: {
            ...storage.env,
            CONFIG_FILE: deploymentFile(folder, yaml),
            API_KEYS: ADMIN_KEY,
            BUDGETS_TOKENS_PER_DAY: '100',
            BUDGETS_TOKENS_PER_TURN: '120',
            WEBHOOKS_ALLOW_HTTP: 'true',
            WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
            WEBHOOKS_POLL_MS: '20',
          },
          llmOptions: { rules: RULES },
        });
        user = new ServiceUser(harness);
        const created = await fetch(`${harness.baseURL}/webhooks`, {
          method: 'POST',
          headers: { ...AS_ADMIN, 'Content-Type': 'application/json' },
          body: JSON.stringify({ url: `http://127.0.0.1:${receiver.port}/hook`, events: ['budget.exceeded'], secret: WEBHOOK_SECRET }),
        });
        expect(created.status).to.equal(201);
        webhookId = ((await created.json()) as { id: string }).id;
      });
      after(async () => {
        await harness?.close();
        await receiver.stop();
        await storage?.cleanup();
        if (folder) rmSync(folder, { recursive: true, force: true });
      });
      afterEach(() => {
        expect(receiver.badSignatures, 'every webhook signature verifies').to.deep.equal([]);
      });

      it('answers two turns of 50 tokens, then refuses the third as OpenAI refuses a spent quota: RateLimitError insufficient_quota, not retried, nothing stored, no LLM call', async () => {
        const startedAt = Date.now();
        await spendDay(user, 'boundary-user');
        expect(user.llmCallsOf('boundary-user')).to.have.length(2);
        const before = await user.scrape();
        const sessionsBefore = (await user.usage('boundary-user')).sessions;
        expect(sessionsBefore).to.equal(2);

        // A client that would retry a 429 twice: x-should-retry: false keeps it to one request.
        const refusedSession = `refused-session-${Date.now()}`;
        const error = await rejection(user.chat('boundary-user', `turn 2 ${FIFTY}`, { sessionId: refusedSession, maxRetries: 2 }));
        const body = expectQuotaError(error, 'tokens_per_day', 100, startedAt);
        expect(body.used).to.equal(100);
        expect(body.message).to.include('budgets.default.tokens_per_day').and.include('boundary-user');
        const retryAfter = (error as InstanceType<typeof OpenAI.RateLimitError>).headers.get('retry-after');
        expect(retryAfter).to.match(/^[1-9]\d*$/);
        expect(Number(retryAfter)).to.be.at.most(86_400);
        // The wait is the time left until the budget resets (the day's end, UTC).
        expect(Number(retryAfter)).to.be.closeTo(body.resets_at - Date.now() / 1000, 5);

        expect(user.llmCallsOf('boundary-user'), 'the LLM is not called for a refused request').to.have.length(2);
        expect(await user.storedOf(refusedSession), 'a refused request stores nothing').to.deep.equal({ sessions: 0, conversations: 0 });
        expect((await user.usage('boundary-user')).sessions).to.equal(sessionsBefore);

        const chat429 = { method: 'POST', route: '/v1/chat/completions', status: '429' };
        const after = await waitFor(async () => {
          const samples = await user.scrape();
          return count(samples, 'http_requests_total', chat429) > count(before, 'http_requests_total', chat429) ? samples : undefined;
        }, 'the refused request to be counted');
        expect(count(after, 'http_requests_total', chat429) - count(before, 'http_requests_total', chat429), 'requests answered 429').to.equal(1);
        expect(count(after, ...refusals('tokens_per_day', 'request')) - count(before, ...refusals('tokens_per_day', 'request')), 'budget_refusals_total').to.equal(1);
      });

      it('answers the refusal over plain HTTP in the OpenAI error shape, with Retry-After, to a streaming request before any event, and to the Responses API', async () => {
        const startedAt = Date.now();
        await spendDay(user, 'shape-user');
        const before = await user.scrape();
        for (const stream of [false, true]) {
          const response = await user.post('shape-user', `again ${FIFTY}`, { stream });
          expect(response.status, `stream: ${stream}`).to.equal(429);
          expect(response.headers.get('content-type')).to.match(/^application\/json/);
          expect(response.headers.get('retry-after')).to.match(/^[1-9]\d*$/);
          expect(response.headers.get('x-should-retry')).to.equal('false');
          const body = (await response.json()) as { error: QuotaError };
          expectSchema('ErrorResponse', body);
          expect(body.error).to.include({ type: 'insufficient_quota', code: 'insufficient_quota', param: null, budget: 'tokens_per_day', limit: 100, used: 100 });
          expect(resetsSince(startedAt, nextMidnight)).to.include(body.error.resets_at);
        }
        const error = await rejection(
          user.client().responses.create({ model: 'svc-agent', input: `shape-user: responses ${FIFTY}` }, { headers: { 'X-User-ID': 'shape-user' } }),
        );
        expectQuotaError(error, 'tokens_per_day', 100, startedAt);
        expect(user.llmCallsOf('shape-user')).to.have.length(2);
        const after = await user.scrape();
        expect(count(after, ...refusals('tokens_per_day', 'request')) - count(before, ...refusals('tokens_per_day', 'request'))).to.equal(3);
      });

      it('still admits a user 1 token under the day budget (99 of 100), and refuses once a turn took the user past it', async () => {
        const startedAt = Date.now();
        const first = await user.chat('under-user', `first ${NINETY_NINE}`);
        expect(first.usage?.total_tokens).to.equal(99);
        const second = await user.chat('under-user', `second ${FIFTY}`);
        expect(second.choices[0]!.message.content).to.equal('fifty tokens');
        const body = expectQuotaError(await rejection(user.chat('under-user', `third ${FIFTY}`)), 'tokens_per_day', 100, startedAt);
        expect(body.used).to.equal(149);
        expect(user.llmCallsOf('under-user')).to.have.length(2);
      });

      it("shows in /v1/usage each budget of the user with the figures of the user's total_tokens, and counts them in user_token_usage", async () => {
        const startedAt = Date.now();
        await user.chat('monthly-user', `once ${FIFTY}`);
        const usage = await user.usage('monthly-user');
        expect(usage).to.include({ user_id: 'monthly-user', sessions: 1, prompt_tokens: 40, completion_tokens: 10, total_tokens: 50 });
        const [day, month, turn] = usage.budgets!;
        expect(usage.budgets!.map((entry) => entry.budget)).to.deep.equal(['tokens_per_day', 'tokens_per_month', 'tokens_per_turn']);
        expect(day).to.include({ limit: 100, used: usage.total_tokens, remaining: 100 - usage.total_tokens });
        expect(month).to.include({ limit: 1000, used: usage.total_tokens, remaining: 1000 - usage.total_tokens });
        expect(resetsSince(startedAt, nextMidnight)).to.include(day!.resets_at);
        expect(resetsSince(startedAt, nextMonth)).to.include(month!.resets_at);
        expect(turn).to.deep.equal({ budget: 'tokens_per_turn', limit: 120, used: null, remaining: null, resets_at: null });

        // The counter the budgets read, once its write has committed: the user's day.
        const rows = await waitFor(async () => {
          const found = await user.tokenRows('monthly-user');
          return found.length === 1 ? found : undefined;
        }, "monthly-user's row in user_token_usage");
        expect(rows[0]).to.include({ prompt_tokens: 40, completion_tokens: 10 });

        // A user of the day budget alone, past it: nothing remains.
        await spendDay(user, 'spent-user');
        const spent = await user.usage('spent-user');
        expect(spent.total_tokens).to.equal(100);
        expect(spent.budgets).to.deep.equal([
          { budget: 'tokens_per_day', limit: 100, used: 100, remaining: 0, resets_at: spent.budgets![0]!.resets_at },
          { budget: 'tokens_per_turn', limit: 120, used: null, remaining: null, resets_at: null },
        ]);
        expect(resetsSince(startedAt, nextMidnight)).to.include(spent.budgets![0]!.resets_at);
      });

      it('stops a chat turn whose tool loop reached tokens_per_turn after 3 LLM calls (50, 100, 150 tokens) with finish_reason length; the tool ran between them', async () => {
        const before = await user.scrape();
        const completion = await user.chat('loop-user', `chat ${LOOP}`);
        expect(completion.choices[0]!.finish_reason).to.equal('length');
        expect(completion.usage).to.include({ prompt_tokens: 120, completion_tokens: 30, total_tokens: 150 });
        const calls = user.llmCallsOf('loop-user').filter((request) => lastUserText(request).includes('chat'));
        expect(calls, 'no 4th LLM call once the turn has 150 of 120 tokens').to.have.length(3);
        // The real tool's results reached the next calls: one result in the 2nd, two in the 3rd.
        expect(calls.map((request) => toolResultsOf(request).length)).to.deep.equal([0, 1, 2]);
        for (const result of [...toolResultsOf(calls[1]!), ...toolResultsOf(calls[2]!)]) expect(result).to.match(/\b5\b/);
        const after = await user.scrape();
        expect(count(after, ...refusals('tokens_per_turn', 'llm_call')) - count(before, ...refusals('tokens_per_turn', 'llm_call'))).to.equal(1);
        expect(count(after, ...refusals('tokens_per_turn', 'request')) - count(before, ...refusals('tokens_per_turn', 'request'))).to.equal(0);
        // A turn's budget refuses no request: the next turn starts afresh.
        const next = await user.chat('loop-user', `next ${FIFTY}`);
        expect(next.choices[0]!.finish_reason).to.equal('stop');
      });

      it('ends a streamed chat turn stopped by tokens_per_turn with finish_reason length, after 3 LLM calls', async () => {
        const stream = await user
          .client()
          .chat.completions.create(
            { model: 'svc-agent', messages: [{ role: 'user', content: `loop-user: stream ${LOOP}` }], stream: true, stream_options: { include_usage: true } },
            { headers: { 'X-User-ID': 'loop-user' } },
          );
        const finishReasons: string[] = [];
        let usage: OpenAI.CompletionUsage | undefined | null;
        for await (const chunk of stream) {
          for (const choice of chunk.choices) if (choice.finish_reason) finishReasons.push(choice.finish_reason);
          usage = chunk.usage ?? usage;
        }
        expect(finishReasons).to.deep.equal(['length']);
        expect(usage?.total_tokens).to.equal(150);
        expect(user.llmCallsOf('loop-user').filter((request) => lastUserText(request).includes('stream'))).to.have.length(3);
      });

      it('answers a Responses API turn stopped by tokens_per_turn as incomplete (max_output_tokens), streamed or not, after 3 LLM calls', async () => {
        const client = user.client();
        const headers = { 'X-User-ID': 'loop-user' };
        const response = await client.responses.create({ model: 'svc-agent', input: `loop-user: responses ${LOOP}` }, { headers });
        expectSchema('Response', response);
        expect(response.status).to.equal('incomplete');
        expect(response.incomplete_details).to.deep.equal({ reason: 'max_output_tokens' });
        const mcpCalls = response.output.filter((item) => item.type === 'mcp_call') as OpenAI.Responses.ResponseOutputItem.McpCall[];
        expect(mcpCalls).to.have.length(3);
        for (const call of mcpCalls) expect(call.output).to.match(/\b5\b/);
        expect(response.usage?.total_tokens).to.equal(150);
        expect(user.llmCallsOf('loop-user').filter((request) => lastUserText(request).includes('responses'))).to.have.length(3);

        const events: OpenAI.Responses.ResponseStreamEvent[] = [];
        for await (const event of await client.responses.create({ model: 'svc-agent', input: `loop-user: streamed responses ${LOOP}`, stream: true }, { headers })) {
          events.push(event);
        }
        for (const event of events) expectSchema('ResponseStreamEvent', event);
        const last = events.at(-1)!;
        expect(last.type).to.equal('response.incomplete');
        expect(events.map((event) => event.type)).not.to.include('response.completed');
        const incomplete = last as OpenAI.Responses.ResponseIncompleteEvent;
        expect(incomplete.response).to.deep.include({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
        expect(user.llmCallsOf('loop-user').filter((request) => lastUserText(request).includes('streamed responses'))).to.have.length(3);
      });

      it('stops a tool loop where the day budget runs out mid-turn (length, after 2 calls of 50), then refuses the next request', async () => {
        const startedAt = Date.now();
        const before = await user.scrape();
        const completion = await user.chat('loop-day-user', `loop ${LOOP}`);
        expect(completion.choices[0]!.finish_reason).to.equal('length');
        expect(completion.usage?.total_tokens).to.equal(100);
        const calls = user.llmCallsOf('loop-day-user');
        expect(calls, 'the 3rd call would pass the day budget of 100').to.have.length(2);
        expect(toolResultsOf(calls[1]!)).to.have.length(1);
        const middle = await user.scrape();
        expect(count(middle, ...refusals('tokens_per_day', 'llm_call')) - count(before, ...refusals('tokens_per_day', 'llm_call'))).to.equal(1);

        const body = expectQuotaError(await rejection(user.chat('loop-day-user', `next ${FIFTY}`)), 'tokens_per_day', 100, startedAt);
        expect(body.used).to.equal(100);
        expect(user.llmCallsOf('loop-day-user')).to.have.length(2);
        const after = await user.scrape();
        expect(count(after, ...refusals('tokens_per_day', 'request')) - count(middle, ...refusals('tokens_per_day', 'request'))).to.equal(1);
        expect(count(after, ...refusals('tokens_per_day', 'llm_call')) - count(middle, ...refusals('tokens_per_day', 'llm_call'))).to.equal(0);
      });

      it('delivers budget.exceeded to a webhook once for two refusals of a user on the same day, and for every turn a turn budget stopped', async () => {
        const startedAt = Date.now();
        const ofUser = (userId: string) => receiver.acknowledged.filter((entry) => entry.event === 'budget.exceeded' && (entry.payload.data as { user_id: string }).user_id === userId);
        await spendDay(user, 'hook-user');
        for (let attempt = 0; attempt < 2; attempt += 1) {
          expectQuotaError(await rejection(user.chat('hook-user', `refused ${attempt} ${FIFTY}`)), 'tokens_per_day', 100, startedAt);
        }
        // A later refusal of another user: its event is queued after hook-user's second, had there been one.
        await spendDay(user, 'hook-marker');
        await rejection(user.chat('hook-marker', `refused ${FIFTY}`));
        await waitFor(() => ofUser('hook-marker').length > 0, "hook-marker's budget.exceeded", 20_000);
        await waitFor(async () => {
          const response = await fetch(`${harness.baseURL}/webhooks/${webhookId}/deliveries?limit=100`, { headers: AS_ADMIN });
          const { data } = (await response.json()) as { data: Array<{ status: string }> };
          return data.every((row) => row.status === 'delivered');
        }, 'every delivery delivered', 20_000);

        const delivered = ofUser('hook-user');
        expect(delivered, 'one event for two refusals the same day').to.have.length(1);
        const [event] = delivered;
        expect(event!.payload.agent_id).to.equal(null);
        const data = event!.payload.data as Record<string, unknown>;
        expect(Object.keys(data).sort()).to.deep.equal(['budget', 'limit', 'refused', 'resets_at', 'used', 'user_id']);
        expect(data).to.include({ user_id: 'hook-user', budget: 'tokens_per_day', limit: 100, used: 100, refused: 'request' });
        expect(resetsSince(startedAt, nextMidnight)).to.include(data.resets_at);

        // Each turn stopped by its own budget is told.
        const sessions: string[] = [];
        for (let turn = 0; turn < 2; turn += 1) {
          const response = await user.post('hook-loop-user', `turn ${turn} ${LOOP}`);
          expect(response.status).to.equal(200);
          expect(((await response.json()) as OpenAI.Chat.ChatCompletion).choices[0]!.finish_reason).to.equal('length');
          sessions.push(response.headers.get('x-session-id')!);
        }
        const stops = await waitFor(() => (ofUser('hook-loop-user').length >= 2 ? ofUser('hook-loop-user') : undefined), "hook-loop-user's two stops", 20_000);
        expect(stops.map((entry) => entry.payload.agent_id).sort()).to.deep.equal([...sessions].sort());
        for (const stop of stops) {
          expect(stop.payload.data).to.deep.equal({ user_id: 'hook-loop-user', budget: 'tokens_per_turn', limit: 120, used: 150, resets_at: null, refused: 'llm_call' });
        }
      });
    });

    describe('budgets in the deployment file: a default of 100 a day, alice 1000, bob lifted (0), carol with a turn budget only', () => {
      let storage: { env: NodeJS.ProcessEnv; cleanup(): Promise<void> };
      let folder: string;
      let harness: TestService;
      let user: ServiceUser;

      before(async () => {
        storage = await target.prepare();
        folder = mkdtempSync(join(tmpdir(), 'svc-budgets-file-'));
        const yaml = [
          'budgets:',
          '  default:',
          '    tokens_per_day: 100',
          '  users:',
          '    alice:',
          '      tokens_per_day: 1000',
          '    bob:',
          '      tokens_per_day: 0',
          '    carol:',
          '      tokens_per_turn: 500',
          '',
        ].join('\n');
        harness = await startTestService({ env: { ...storage.env, CONFIG_FILE: deploymentFile(folder, yaml), API_KEYS: ADMIN_KEY }, llmOptions: { rules: RULES } });
        user = new ServiceUser(harness);
      });
      after(async () => {
        await harness?.close();
        await storage?.cleanup();
        if (folder) rmSync(folder, { recursive: true, force: true });
      });

      it("refuses a user of the default budget at 100, naming budgets.default.tokens_per_day, where alice and bob go on", async () => {
        const startedAt = Date.now();
        for (const userId of ['dave', 'alice', 'bob']) await spendDay(user, userId);
        const refused = expectQuotaError(await rejection(user.chat('dave', `third ${FIFTY}`)), 'tokens_per_day', 100, startedAt);
        expect(refused.message).to.include('budgets.default.tokens_per_day').and.not.include('budgets.users');
        for (const userId of ['alice', 'bob']) {
          const completion = await user.chat(userId, `third ${FIFTY}`);
          expect(completion.choices[0]!.message.content, userId).to.equal('fifty tokens');
        }
      });

      it("refuses alice at her own 1000, naming budgets.users.alice.tokens_per_day", async () => {
        const startedAt = Date.now();
        await user.chat('alice', `big ${THOUSAND}`);
        const refused = expectQuotaError(await rejection(user.chat('alice', `after ${FIFTY}`)), 'tokens_per_day', 1000, startedAt);
        expect(refused.used).to.equal(1150);
        expect(refused.message).to.include('budgets.users.alice.tokens_per_day');
        expect((await user.usage('alice')).budgets).to.deep.equal([{ budget: 'tokens_per_day', limit: 1000, used: 1150, remaining: 0, resets_at: refused.resets_at }]);
      });

      it('never refuses bob, whose 0 lifts the default, and counts none of his tokens', async () => {
        await user.chat('bob', `big ${THOUSAND}`);
        const completion = await user.chat('bob', `after ${FIFTY}`);
        expect(completion.choices[0]!.message.content).to.equal('fifty tokens');
        const usage = await user.usage('bob');
        expect(usage.total_tokens).to.equal(1200);
        expect(usage.budgets).to.deep.equal([]);
        expect(await user.tokenRows('bob')).to.deep.equal([]);
      });

      it("keeps the default day budget for carol, whose entry sets only tokens_per_turn: refused at 100 naming budgets.default.tokens_per_day", async () => {
        const startedAt = Date.now();
        await spendDay(user, 'carol');
        const refused = expectQuotaError(await rejection(user.chat('carol', `third ${FIFTY}`)), 'tokens_per_day', 100, startedAt);
        expect(refused.message).to.include('budgets.default.tokens_per_day');
        const budgets = (await user.usage('carol')).budgets!;
        expect(budgets.map(({ budget, limit }) => ({ budget, limit }))).to.deep.equal([
          { budget: 'tokens_per_day', limit: 100 },
          { budget: 'tokens_per_turn', limit: 500 },
        ]);
      });
    });

    describe('no budget configured', () => {
      let storage: { env: NodeJS.ProcessEnv; cleanup(): Promise<void> };
      let harness: TestService;
      let user: ServiceUser;

      before(async () => {
        storage = await target.prepare();
        harness = await startTestService({ env: { ...storage.env, API_KEYS: ADMIN_KEY }, llmOptions: { rules: RULES } });
        user = new ServiceUser(harness);
      });
      after(async () => {
        await harness?.close();
        await storage?.cleanup();
      });

      it('answers every turn, has no budgets in /v1/usage, and writes nothing to user_token_usage', async () => {
        await spendDay(user, 'free-user');
        await user.chat('free-user', `big ${THOUSAND}`);
        const usage = await user.usage('free-user');
        expect(usage).to.include({ sessions: 3, total_tokens: 1100 });
        expect(usage).not.to.have.property('budgets');
        const rows = await harness.service.database.db.selectFrom('user_token_usage').select('user_id').execute();
        expect(rows).to.deep.equal([]);
        const samples = await user.scrape();
        expect(samples.filter((sample) => sample.name === 'budget_refusals_total')).to.deep.equal([]);
      });
    });
  });
}
