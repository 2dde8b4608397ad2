import { expect } from 'chai';
import { CookieJar } from '../../support/cookie-jar.js';
import { expectSchema } from '../../support/openai-schema.js';
import { authorizeInBrowser, type TestProvider } from '../../support/oidc-test-provider.js';
import { startPerUserToolService, type PerUserToolService } from '../../support/per-user-tool-service.js';
import type { TestService } from '../../support/service-harness.js';

const WHOAMI = 'Who am I? [[tool:mine__whoami {}]]';

/** A login link's address and user; it also carries a signed expiry (`expires`, `sig`). */
function loginLinkOf(value: unknown): { link: string; user_id: string | null } {
  const url = new URL(String(value));
  expect(url.searchParams.get('expires')).to.match(/^\d+$/);
  expect(url.searchParams.get('sig')).to.match(/^[\w-]{43}$/);
  return { link: `${url.origin}${url.pathname}`, user_id: url.searchParams.get('user_id') };
}

type ChatAnswer = { status: number; body: { choices?: Array<{ message: { content: string } }>; error?: Record<string, unknown> } };

describe('per-user tools through the service, with a real OpenID provider', function () {
  this.timeout(60_000);
  let service: PerUserToolService;
  let provider: TestProvider;
  let harness: TestService;
  let publicUrl: string;

  before(async () => {
    service = await startPerUserToolService();
    ({ harness, provider, publicUrl } = service);
  });
  after(async () => {
    await service?.close();
  });

  async function ask(userId: string, sessionId?: string): Promise<ChatAnswer & { sessionId: string | null }> {
    const response = await fetch(`${harness.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-User-ID': userId, ...(sessionId ? { 'X-Session-ID': sessionId } : {}) },
      body: JSON.stringify({ messages: [{ role: 'user', content: WHOAMI }] }),
    });
    const body = (await response.json()) as ChatAnswer['body'];
    expectSchema(response.ok ? 'CreateChatCompletionResponse' : 'ErrorResponse', body);
    return { status: response.status, body, sessionId: response.headers.get('x-session-id') };
  }

  async function connect(userId: string): Promise<void> {
    const jar = new CookieJar();
    const loginUrl = `${publicUrl}/auth/idp/login?user_id=${encodeURIComponent(userId)}`;
    const callback = await authorizeInBrowser(jar, loginUrl, { account: `${userId}-account`, callbackPrefix: `${publicUrl}/auth/idp/callback` });
    const response = await jar.fetch(callback);
    expect(response.status).to.equal(200);
  }

  it('asks an unconnected user to connect, then runs the same request with that user\'s own token', async () => {
    const refused = await ask('alice');
    expect(refused.status).to.equal(401);
    expect(refused.body.error).to.include({ type: 'tool_auth_required', server: 'mine', tool: 'whoami' });
    expect(loginLinkOf(refused.body.error!.login_url)).to.deep.equal({ link: `${publicUrl}/auth/idp/login`, user_id: 'alice' });
    const sessionId = refused.sessionId!;

    await connect('alice');
    const answered = await ask('alice', sessionId);
    expect(answered.status).to.equal(200);
    const content = answered.body.choices![0]!.message.content;
    const token = /"token":"([^"]+)"/.exec(content)?.[1];
    expect(token, content).to.be.a('string');
    // The token is alice's: the provider's userinfo endpoint says whose it is.
    const me = await fetch(`${provider.issuer}/me`, { headers: { authorization: `Bearer ${token}` } });
    expect(((await me.json()) as { sub: string }).sub).to.equal('alice-account');

    // The user's message was kept, and stored once, not twice.
    const rows = await harness.service.database.db.selectFrom('conversations').select(['role', 'message']).where('session_id', '=', sessionId).orderBy('id').execute();
    expect(rows.filter((row) => row.role === 'user').map((row) => row.message)).to.deep.equal([WHOAMI]);
    expect(rows.at(-1)!.role).to.equal('assistant');
  });

  it('stores the token encrypted: the row holds no plaintext token', async () => {
    const rows = await harness.service.database.db.selectFrom('oauth_tokens').selectAll().where('user_id', '=', 'alice').execute();
    expect(rows).to.have.length(1);
    const answered = await ask('alice');
    const token = /"token":"([^"]+)"/.exec(answered.body.choices![0]!.message.content)![1]!;
    expect(JSON.stringify(rows[0])).to.not.include(token);
  });

  it('never lends one user\'s token to another user', async () => {
    const bob = await ask('bob');
    expect(bob.status).to.equal(401);
    expect(loginLinkOf(bob.body.error!.login_url)).to.deep.equal({ link: `${publicUrl}/auth/idp/login`, user_id: 'bob' });
  });
});
