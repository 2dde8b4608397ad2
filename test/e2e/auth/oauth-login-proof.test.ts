import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { CookieJar } from '../../support/cookie-jar.js';
import { authorizeInBrowser, type TestProvider } from '../../support/oidc-test-provider.js';
import { startPerUserToolService, type PerUserToolService } from '../../support/per-user-tool-service.js';
import type { TestService } from '../../support/service-harness.js';

const KEYS = { alice: 'sk-login-alice', bob: 'sk-login-bob', admin: 'sk-login-admin' } as const;
const WHOAMI = 'Who am I? [[tool:mine__whoami {}]]';

describe('OAuth login with API keys set: a login proves it was issued to its user', function () {
  this.timeout(60_000);
  let service: PerUserToolService;
  let provider: TestProvider;
  let harness: TestService;
  let publicUrl: string;

  before(async () => {
    service = await startPerUserToolService({ API_KEYS: `${KEYS.alice}:alice,${KEYS.bob}:bob,${KEYS.admin}`, OAUTH_LOGIN_LINK_TTL_MS: '60000' });
    ({ harness, provider, publicUrl } = service);
  });
  after(async () => {
    await service?.close();
  });

  /** Opens a login link as a browser would (no redirect followed); its status and error. */
  async function openLogin(url: string, key?: string): Promise<{ status: number; error?: { type: string; param: string | null; message: string }; location: string | null }> {
    const response = await fetch(url, { redirect: 'manual', headers: key ? { Authorization: `Bearer ${key}` } : {} });
    const location = response.headers.get('location');
    const body = response.status >= 400 ? ((await response.json()) as { error: { type: string; param: string | null; message: string } }) : undefined;
    return { status: response.status, error: body?.error, location };
  }

  /** The login link a tool_auth_required error hands alice. */
  async function aliceLoginLink(): Promise<string> {
    const response = await fetch(`${harness.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${KEYS.alice}` },
      body: JSON.stringify({ messages: [{ role: 'user', content: WHOAMI }] }),
    });
    expect(response.status).to.equal(401);
    const body = (await response.json()) as { error: { type: string; login_url: string } };
    expect(body.error.type).to.equal('tool_auth_required');
    return body.error.login_url;
  }

  it('refuses, before contacting the provider, an anonymous login, a login with another user\'s key, and a forged, altered or expired link', async () => {
    const before = provider.requests.length;
    const login = `${publicUrl}/auth/idp/login?user_id=alice`;
    const anonymous = await openLogin(login);
    expect(anonymous.status).to.equal(401);
    expect(anonymous.error).to.include({ type: 'authentication_error', param: 'sig' });

    const bobForAlice = await openLogin(login, KEYS.bob);
    expect(bobForAlice.status).to.equal(403);
    expect(bobForAlice.error!.type).to.equal('permission_error');

    const signed = new URL(await aliceLoginLink());
    const forVictim = new URL(signed);
    forVictim.searchParams.set('user_id', 'bob');
    const later = new URL(signed);
    later.searchParams.set('expires', String(Number(signed.searchParams.get('expires')) + 3600));
    const expired = new URL(signed);
    expired.searchParams.set('expires', String(Math.floor(Date.now() / 1000) - 1));
    const forged = new URL(signed);
    forged.searchParams.set('sig', randomBytes(32).toString('base64url'));
    for (const url of [forVictim, later, expired, forged]) {
      const refused = await openLogin(url.href);
      expect(refused.status, url.href).to.equal(403);
      expect(refused.error, url.href).to.include({ type: 'permission_error', param: 'sig' });
    }
    expect(provider.requests.slice(before), 'requests the provider received').to.deep.equal([]);
    expect(await harness.service.database.db.selectFrom('oauth_states').selectAll().execute(), 'logins started').to.deep.equal([]);
  });

  it("starts a login for the user's own key, for an admin key, and for the signed link of a tool_auth_required error", async () => {
    const login = `${publicUrl}/auth/idp/login?user_id=alice`;
    for (const key of [KEYS.alice, KEYS.admin]) {
      const started = await openLogin(login, key);
      expect(started.status).to.equal(302);
      expect(started.location!.startsWith(provider.issuer)).to.equal(true);
    }
    const started = await openLogin(await aliceLoginLink());
    expect(started.status).to.equal(302);
  });

  it("connects alice's account through the signed link, and her tool call then runs with her token", async () => {
    const jar = new CookieJar();
    const callback = await authorizeInBrowser(jar, await aliceLoginLink(), { account: 'alice-account', callbackPrefix: `${publicUrl}/auth/idp/callback` });
    expect((await jar.fetch(callback)).status).to.equal(200);
    const answered = await fetch(`${harness.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${KEYS.alice}` },
      body: JSON.stringify({ messages: [{ role: 'user', content: WHOAMI }] }),
    });
    expect(answered.status).to.equal(200);
    const content = ((await answered.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content;
    const token = /"token":"([^"]+)"/.exec(content)?.[1];
    const me = await fetch(`${provider.issuer}/me`, { headers: { authorization: `Bearer ${token}` } });
    expect(((await me.json()) as { sub: string }).sub).to.equal('alice-account');
  });
});
