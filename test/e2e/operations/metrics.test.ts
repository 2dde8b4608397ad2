import { expect } from 'chai';
import { parsePrometheusText, sampleValue, type PrometheusSample } from '../../support/prometheus-text.js';
import { startTestService, type TestService } from '../../support/service-harness.js';
import { waitFor } from '../../support/wait-for.js';

type ErrorBody = { error: { message: string; type: string; code: string | null } };

const CHAT_ROUTE = { method: 'POST', route: '/v1/chat/completions', status: '200' };

async function scrape(harness: TestService, headers: Record<string, string> = {}): Promise<PrometheusSample[]> {
  const response = await fetch(`${harness.service.url}/metrics`, { headers });
  expect(response.status).to.equal(200);
  expect(response.headers.get('content-type')).to.match(/^text\/plain; version=0\.0\.4/);
  return parsePrometheusText(await response.text());
}

/** A counter's value, 0 before its first increment (a labelled counter has no sample until then). */
function count(samples: PrometheusSample[], name: string, labels: Record<string, string> = {}): number {
  return sampleValue(samples, name, labels) ?? 0;
}

async function expectError(response: Response, status: number, type: string, code: string): Promise<void> {
  expect(response.status).to.equal(status);
  const body = (await response.json()) as ErrorBody;
  expect(body.error).to.include({ type, code });
}

describe('GET /metrics', () => {
  describe('in local mode', () => {
    let harness: TestService;
    before(async () => {
      harness = await startTestService();
    });
    after(async () => harness?.close());

    it('counts chat requests, turns and LLM calls by outcome when one chat succeeds and one meets a failing LLM', async () => {
      const before = await scrape(harness);
      const ok = await harness.client.chat.completions.create({ model: 'svc-default', messages: [{ role: 'user', content: 'hello' }] });
      const failed = await harness.client.chat.completions.create({ model: 'svc-default', messages: [{ role: 'user', content: '[[error:503]]' }] });
      expect(ok.choices[0]!.message.content).to.equal('Echo: hello');
      expect(failed.choices[0]!.message.content).to.match(/503/);

      // The request counter is written when the response has gone out.
      const after = await waitFor(async () => {
        const samples = await scrape(harness);
        return count(samples, 'http_requests_total', CHAT_ROUTE) >= count(before, 'http_requests_total', CHAT_ROUTE) + 2 ? samples : undefined;
      }, 'both chat requests to be counted');
      const increase = (name: string, labels: Record<string, string> = {}) => count(after, name, labels) - count(before, name, labels);
      expect(increase('http_requests_total', CHAT_ROUTE)).to.equal(2);
      expect(increase('http_request_duration_seconds_count', CHAT_ROUTE)).to.equal(2);
      expect(increase('turns_total', { outcome: 'ok' })).to.equal(1);
      expect(increase('turns_total', { outcome: 'llm_error' })).to.equal(1);
      expect(increase('llm_request_duration_seconds_count', { outcome: 'ok' })).to.equal(1);
      expect(increase('llm_request_duration_seconds_count', { outcome: 'error' })).to.equal(1);
      expect(increase('llm_errors_total')).to.equal(1);
      expect(count(after, 'cached_actors')).to.be.at.least(2);
      expect(count(after, 'live_sessions')).to.be.at.least(2);
      expect(sampleValue(after, 'webhook_backlog')).to.equal(0);
      expect(sampleValue(after, 'process_cpu_user_seconds_total')).to.be.a('number');
    });

    it('times each stage of a streamed turn once, and every query\'s wait for a database connection', async () => {
      const before = await scrape(harness);
      const stream = await harness.client.chat.completions.create({ model: 'svc-default', messages: [{ role: 'user', content: 'stage by stage' }], stream: true });
      let content = '';
      for await (const chunk of stream) content += chunk.choices[0]?.delta?.content ?? '';
      expect(content).to.equal('Echo: stage by stage');

      const stageCount = (samples: PrometheusSample[], stage: string) => count(samples, 'turn_stage_duration_seconds_count', { stage });
      const after = await waitFor(async () => {
        const samples = await scrape(harness);
        return stageCount(samples, 'reply_committed') > stageCount(before, 'reply_committed') ? samples : undefined;
      }, 'the turn\'s end to be timed');
      for (const stage of ['session_wait', 'plan', 'user_committed', 'prompt', 'llm_first_byte', 'llm_total', 'reply_committed']) {
        expect(stageCount(after, stage) - stageCount(before, stage), stage).to.equal(1);
      }
      // A turn reads and writes the database more than once.
      expect(stageCount(after, 'connection_wait') - stageCount(before, 'connection_wait')).to.be.at.least(2);
      const stageSum = (samples: PrometheusSample[], stage: string) => count(samples, 'turn_stage_duration_seconds_sum', { stage });
      const firstByte = stageSum(after, 'llm_first_byte') - stageSum(before, 'llm_first_byte');
      const llmTotal = stageSum(after, 'llm_total') - stageSum(before, 'llm_total');
      expect(firstByte).to.be.greaterThan(0);
      expect(firstByte).to.be.at.most(llmTotal);
    });

    it('exports every stage of a turn before any turn ran, at zero (queries at start wait for connections already)', async () => {
      const fresh = await startTestService();
      try {
        const samples = await scrape(fresh);
        expect(sampleValue(samples, 'turn_stage_duration_seconds_count', { stage: 'connection_wait' })).to.be.greaterThan(0);
        for (const stage of ['session_wait', 'plan', 'user_committed', 'prompt', 'llm_first_byte', 'llm_total', 'reply_committed']) {
          expect(sampleValue(samples, 'turn_stage_duration_seconds_count', { stage }), stage).to.equal(0);
        }
      } finally {
        await fresh.close();
      }
    });

    it('labels a request by its route pattern, and one no route took as unmatched, never by the raw URL', async () => {
      const before = await scrape(harness);
      expect((await fetch(`${harness.baseURL}/models/model-xyz-123`)).status).to.equal(404);
      expect((await fetch(`${harness.service.url}/no/such/path-abc-789`)).status).to.equal(404);

      const after = await scrape(harness);
      const increase = (labels: Record<string, string>) => count(after, 'http_requests_total', labels) - count(before, 'http_requests_total', labels);
      expect(increase({ method: 'GET', route: '/v1/models/:id', status: '404' })).to.equal(1);
      expect(increase({ method: 'GET', route: 'unmatched', status: '404' })).to.equal(1);
      const routes = after.filter((sample) => sample.name === 'http_requests_total').map((sample) => sample.labels.route);
      expect(routes.join(' ')).not.to.match(/model-xyz-123|path-abc-789/);
    });

    it('counts a chat whose client left before the response began with status 499', async () => {
      const left = { ...CHAT_ROUTE, status: '499' };
      const before = await scrape(harness);
      const controller = new AbortController();
      const request = fetch(`${harness.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'wait [[hang]]' }] }),
        signal: controller.signal,
      });
      await harness.llm.waitForRequest((recorded) => JSON.stringify(recorded.body).includes('[[hang]]'));
      controller.abort();
      await request.catch(() => undefined);

      const after = await waitFor(async () => {
        const samples = await scrape(harness);
        return count(samples, 'http_requests_total', left) > count(before, 'http_requests_total', left) ? samples : undefined;
      }, 'the abandoned chat to be counted');
      expect(count(after, 'http_requests_total', left) - count(before, 'http_requests_total', left)).to.equal(1);
    });
  });

  describe('with API_KEYS and METRICS_TOKEN', () => {
    let harness: TestService;
    before(async () => {
      harness = await startTestService({ env: { API_KEYS: 'admin-key, alice-key:alice', METRICS_TOKEN: 'prometheus-token' } });
    });
    after(async () => harness?.close());

    it('refuses a scrape without a key or with a wrong one', async () => {
      await expectError(await fetch(`${harness.service.url}/metrics`), 401, 'authentication_error', 'missing_api_key');
      await expectError(await fetch(`${harness.service.url}/metrics`, { headers: { Authorization: 'Bearer wrong-key' } }), 401, 'authentication_error', 'invalid_api_key');
    });

    it('serves a scrape with the metrics token', async () => {
      const samples = await scrape(harness, { Authorization: 'Bearer prometheus-token' });
      expect(sampleValue(samples, 'live_sessions')).to.equal(0);
    });

    it('serves a scrape with an admin key (bound to no user)', async () => {
      const samples = await scrape(harness, { Authorization: 'Bearer admin-key' });
      expect(sampleValue(samples, 'live_sessions')).to.equal(0);
    });

    it('refuses a scrape with a key bound to a user (403), however the path is spelt', async () => {
      for (const path of ['/metrics', '/metrics/', '/METRICS']) {
        await expectError(await fetch(`${harness.service.url}${path}`, { headers: { Authorization: 'Bearer alice-key' } }), 403, 'permission_error', 'forbidden');
      }
    });

    it('refuses the metrics token on every other route (403)', async () => {
      const headers = { Authorization: 'Bearer prometheus-token', 'Content-Type': 'application/json' };
      const chat = await fetch(`${harness.baseURL}/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }) });
      await expectError(chat, 403, 'permission_error', 'forbidden');
      await expectError(await fetch(`${harness.baseURL}/usage`, { headers }), 403, 'permission_error', 'forbidden');
      await expectError(await fetch(`${harness.service.url}/inspect/sessions`, { headers }), 403, 'permission_error', 'forbidden');
    });
  });

  describe('with API_KEYS and no METRICS_TOKEN', () => {
    let harness: TestService;
    before(async () => {
      harness = await startTestService({ env: { API_KEYS: 'scrape-key' } });
    });
    after(async () => harness?.close());

    it('serves a scrape with an admin key, as before the metrics token existed', async () => {
      const samples = await scrape(harness, { Authorization: 'Bearer scrape-key' });
      expect(sampleValue(samples, 'live_sessions')).to.equal(0);
    });
  });

  describe('with METRICS_ENABLED=false', () => {
    let harness: TestService;
    before(async () => {
      harness = await startTestService({ env: { METRICS_ENABLED: 'false' } });
    });
    after(async () => harness?.close());

    it('answers 404 in the OpenAI error shape', async () => {
      await expectError(await fetch(`${harness.service.url}/metrics`), 404, 'not_found_error', 'not_found');
    });
  });
});
