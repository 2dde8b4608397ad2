import { expect } from 'chai';
import OpenAI from 'openai';
import { expectSchema } from '../../support/openai-schema.js';
import { startTestService, type TestService } from '../../support/service-harness.js';

type ErrorBody = { error: { message: string; type: string; code: string | null; param: string | null } };

function clientWith(harness: TestService, apiKey: string): OpenAI {
  return new OpenAI({ baseURL: harness.baseURL, apiKey, maxRetries: 0 });
}

async function expectError(response: Response, status: number, type: string, code: string): Promise<ErrorBody> {
  expect(response.status).to.equal(status);
  const body = (await response.json()) as ErrorBody;
  expectSchema('ErrorResponse', body);
  expect(body.error).to.include({ type, code });
  expect(body.error.message).to.be.a('string').that.is.not.empty;
  return body;
}

function chat(harness: TestService, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${harness.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], ...body }),
  });
}

describe('API keys', () => {
  describe('local mode (no API_KEYS)', () => {
    let harness: TestService;
    before(async () => {
      harness = await startTestService();
    });
    after(async () => harness?.close());

    it('serves chat to the openai client with a placeholder key and to a request with no key', async () => {
      const completion = await harness.client.chat.completions.create({ model: 'svc-default', messages: [{ role: 'user', content: 'local' }] });
      expect(completion.choices[0]!.message.content).to.equal('Echo: local');
      expect((await chat(harness, {})).status).to.equal(200);
      expect((await fetch(`${harness.service.url}/health`)).status).to.equal(200);
      expect((await fetch(`${harness.baseURL}/models`)).status).to.equal(200);
    });

    it('closes the agent endpoints, saying no API keys are configured', async () => {
      for (const headers of [{}, { Authorization: 'Bearer placeholder' }] as Array<Record<string, string>>) {
        const body = await expectError(await fetch(`${harness.baseURL}/agents`, { headers }), 401, 'authentication_error', 'missing_api_key');
        expect(body.error.message).to.match(/no api keys are configured/i);
      }
      await expectError(await fetch(`${harness.baseURL}/agents/abc`, { method: 'DELETE' }), 401, 'authentication_error', 'missing_api_key');
    });
  });

  describe('with API_KEYS', () => {
    let harness: TestService;
    before(async () => {
      harness = await startTestService({ env: { API_KEYS: 'admin-key, alice-key:alice' } });
    });
    after(async () => harness?.close());

    it('refuses chat, models and health without a key (missing_api_key)', async () => {
      await expectError(await chat(harness, {}), 401, 'authentication_error', 'missing_api_key');
      await expectError(await fetch(`${harness.baseURL}/models`), 401, 'authentication_error', 'missing_api_key');
      await expectError(await fetch(`${harness.service.url}/health`), 401, 'authentication_error', 'missing_api_key');
      await expectError(await fetch(`${harness.baseURL}/agents`), 401, 'authentication_error', 'missing_api_key');
    });

    it('refuses a wrong key (invalid_api_key), through the openai client too', async () => {
      const error = await clientWith(harness, 'wrong-key')
        .chat.completions.create({ model: 'svc-default', messages: [{ role: 'user', content: 'hi' }] })
        .then(
          () => null,
          (caught: unknown) => caught,
        );
      expect(error).to.be.instanceOf(OpenAI.AuthenticationError);
      expect((error as InstanceType<typeof OpenAI.AuthenticationError>).code).to.equal('invalid_api_key');
      await expectError(await fetch(`${harness.baseURL}/agents`, { headers: { Authorization: 'Bearer wrong-key' } }), 401, 'authentication_error', 'invalid_api_key');
      await expectError(await fetch(`${harness.baseURL}/agents`, { headers: { Authorization: 'Basic admin-key' } }), 401, 'authentication_error', 'missing_api_key');
    });

    it('serves a valid key', async () => {
      const completion = await clientWith(harness, 'admin-key').chat.completions.create({ model: 'svc-default', messages: [{ role: 'user', content: 'keyed' }] });
      expect(completion.choices[0]!.message.content).to.equal('Echo: keyed');
      const models = await clientWith(harness, 'admin-key').models.list();
      expect(models.data.length).to.be.greaterThan(0);
      expect((await fetch(`${harness.service.url}/health`, { headers: { Authorization: 'Bearer admin-key' } })).status).to.equal(200);
      expect((await fetch(`${harness.baseURL}/agents`, { headers: { Authorization: 'Bearer admin-key' } })).status).to.equal(200);
    });

    it('keeps the browser legs of the OAuth login open but the accounts endpoints behind the key', async () => {
      // OAuth is not configured here: the login answers 501, not 401.
      await expectError(await fetch(`${harness.service.url}/auth/idp/login?user_id=alice`, { redirect: 'manual' }), 501, 'not_implemented_error', 'not_implemented');
      await expectError(await fetch(`${harness.service.url}/auth/idp/callback?state=x`, { redirect: 'manual' }), 501, 'not_implemented_error', 'not_implemented');
      await expectError(await fetch(`${harness.service.url}/auth/idp/accounts?user_id=alice`), 401, 'authentication_error', 'missing_api_key');
    });

    it('makes a user-bound key act as its user and refuses another user (403)', async () => {
      const alice = { Authorization: 'Bearer alice-key' };
      const own = await chat(harness, {}, alice);
      expect(own.status).to.equal(200);
      const sessionId = own.headers.get('x-session-id')!;
      const agent = (await (await fetch(`${harness.baseURL}/agents/${sessionId}`, { headers: alice })).json()) as { user_id: string };
      expect(agent.user_id).to.equal('alice');
      expect((await chat(harness, {}, { ...alice, 'X-User-ID': 'alice' })).status).to.equal(200);

      await expectError(await chat(harness, {}, { ...alice, 'X-User-ID': 'bob' }), 403, 'permission_error', 'forbidden');
      await expectError(await chat(harness, { user_id: 'bob' }, alice), 403, 'permission_error', 'forbidden');
      const error = await clientWith(harness, 'alice-key')
        .chat.completions.create({ model: 'svc-default', messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'X-User-ID': 'bob' } })
        .then(
          () => null,
          (caught: unknown) => caught,
        );
      expect(error).to.be.instanceOf(OpenAI.PermissionDeniedError);
      await expectError(await fetch(`${harness.baseURL}/agents?user_id=bob`, { headers: alice }), 403, 'permission_error', 'forbidden');
    });

    it('lets an unbound key act as any user', async () => {
      const response = await chat(harness, { user_id: 'carol' }, { Authorization: 'Bearer admin-key' });
      expect(response.status).to.equal(200);
      const agent = (await (await fetch(`${harness.baseURL}/agents/${response.headers.get('x-session-id')}`, { headers: { Authorization: 'Bearer admin-key' } })).json()) as {
        user_id: string;
      };
      expect(agent.user_id).to.equal('carol');
    });
  });
});
