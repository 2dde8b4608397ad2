import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import express from 'express';
import { sql } from 'kysely';
import { refreshTokenGrant, ResponseBodyError, tokenRevocation } from 'openid-client';
import winston from 'winston';
import { createAuthDisabledRouter, createAuthRouter } from '../../gateway/auth/auth-routes.js';
import { createErrorHandler, notFoundHandler } from '../../gateway/http/error-handler.js';
import { createOidcConfigurationSource } from '../../runtime/accounts/oidc-client.js';
import type { OidcConfigurationSource } from '../../runtime/accounts/oidc-client.js';
import type { TokenStore } from '../../runtime/ports.js';
import { createTokenCipher } from '../../runtime/accounts/token-cipher.js';
import { createTokenVault } from '../../runtime/accounts/token-vault.js';
import type { TokenVault } from '../../runtime/accounts/token-vault.js';
import { createDatabase, createOAuthStateRepository, createTokenRepository, migrateToLatest } from '../../storage/index.js';
import type { Database } from '../../storage/index.js';
import { CookieJar } from '../support/cookie-jar.js';
import { pgliteTemplate } from '../support/databases.js';
import { authorizeInBrowser, startTestProvider } from '../support/oidc-test-provider.js';
import type { TestProvider } from '../support/oidc-test-provider.js';

const ACCESS_TOKEN_TTL_S = 30;
const SCOPES = 'openid email offline_access';

type ErrorBody = { error: { message: string; type: string; param: string | null; code: string | null } };

// 501 and 502 answers are logged as server faults; the tests check the answers instead.
const logger = winston.createLogger({ silent: true });

function listen(server: Server): Promise<string> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** The auth router in a small Express app with the service's error mapping. */
function authApp(router: express.Router): express.Express {
  const app = express();
  app.use(express.json({ type: () => true, strict: false }));
  app.use(router);
  app.use(notFoundHandler);
  app.use(createErrorHandler(logger));
  return app;
}

describe('OAuth flow against a real OpenID provider', function () {
  this.timeout(30_000);
  let database: Database;
  let provider: TestProvider;
  let appServer: Server;
  let appUrl: string;
  let callbackUrl: string;
  let oidc: OidcConfigurationSource;
  let tokens: TokenStore;
  let vault: TokenVault;
  const cipher = createTokenCipher(randomBytes(32));

  before(async function () {
    // The first embedded database of a test process runs initdb, and the provider generates its
    // keys: CPU-bound work that takes tens of seconds on a loaded 2-core machine.
    this.timeout(120_000);
    database = await createDatabase({ dataDir: 'memory://', vector: false, pgliteTemplate: await pgliteTemplate(false) });
    await migrateToLatest(database, { vector: false, embeddingDimensions: 3 });
    appServer = createServer();
    appUrl = await listen(appServer);
    callbackUrl = `${appUrl}/auth/idp/callback`;
    provider = await startTestProvider({ redirectUri: callbackUrl, accessTokenTtlS: ACCESS_TOKEN_TTL_S });
    oidc = createOidcConfigurationSource({ issuerUrl: provider.issuer, clientId: provider.clientId, clientSecret: provider.clientSecret, allowInsecure: true });
    tokens = createTokenRepository(database.db);
    vault = createTokenVault({ tokens, cipher, oidc, refreshMarginMs: 1000, publicUrl: appUrl });
    const router = createAuthRouter({
      vault,
      states: createOAuthStateRepository(database.db),
      oidc,
      settings: { redirectUrl: callbackUrl, scopes: SCOPES, stateTtlMs: 60_000, publicUrl: appUrl },
    });
    appServer.on('request', authApp(router));
  });

  after(async () => {
    if (appServer) await close(appServer);
    await provider?.close();
    await database?.close();
  });

  /** A vault over the same rows that refreshes every token it hands out (the margin exceeds the TTL). */
  function eagerVault(): TokenVault {
    return createTokenVault({ tokens, cipher, oidc, refreshMarginMs: 10 * ACCESS_TOKEN_TTL_S * 1000, publicUrl: appUrl });
  }

  /** Runs login and consent in a fresh browser; returns the browser and the callback URL, not opened yet. */
  async function authorize(userId: string, account = `${userId}-account`) {
    const jar = new CookieJar();
    const callback = await authorizeInBrowser(jar, `${appUrl}/auth/idp/login?user_id=${encodeURIComponent(userId)}`, { account, callbackPrefix: callbackUrl });
    return { jar, callback };
  }

  /** Connects `userId`'s account (signed in at the provider as `account`). */
  async function connect(userId: string, account = `${userId}-account`): Promise<Response> {
    const { jar, callback } = await authorize(userId, account);
    const response = await jar.fetch(callback);
    expect(response.status, await response.clone().text()).to.equal(200);
    return response;
  }

  async function subjectOf(accessToken: string): Promise<string> {
    const response = await fetch(`${provider.issuer}/me`, { headers: { authorization: `Bearer ${accessToken}` } });
    expect(response.status).to.equal(200);
    return ((await response.json()) as { sub: string }).sub;
  }

  async function rawRow(userId: string): Promise<Record<string, unknown> | undefined> {
    const { rows } = await sql<Record<string, unknown>>`select * from oauth_tokens where user_id = ${userId}`.execute(database.db);
    return rows[0];
  }

  async function storedTokenSet(userId: string): Promise<{ access_token: string; refresh_token?: string }> {
    const row = await tokens.get(userId, 'idp');
    return JSON.parse(cipher.decrypt(row!.ciphertext, { userId, provider: 'idp' })) as { access_token: string; refresh_token?: string };
  }

  async function expectRefused(response: Response, pattern: RegExp): Promise<void> {
    expect(response.status).to.equal(400);
    const body = (await response.json()) as ErrorBody;
    expect(body.error).to.include({ type: 'invalid_request_error', code: 'invalid_request' });
    expect(body.error.message).to.match(pattern);
  }

  describe('GET /auth/idp/login', () => {
    it('redirects to the provider with PKCE, state and nonce when a user id is given', async () => {
      const response = await new CookieJar().fetch(`${appUrl}/auth/idp/login?user_id=alice`);
      expect(response.status).to.equal(302);
      const location = new URL(response.headers.get('location')!);
      expect(location.origin + location.pathname).to.equal(`${provider.issuer}/auth`);
      expect(location.searchParams.get('client_id')).to.equal(provider.clientId);
      expect(location.searchParams.get('redirect_uri')).to.equal(callbackUrl);
      expect(location.searchParams.get('response_type')).to.equal('code');
      expect(location.searchParams.get('scope')).to.equal(SCOPES);
      expect(location.searchParams.get('code_challenge_method')).to.equal('S256');
      expect(location.searchParams.get('code_challenge')).to.match(/^[\w-]{43}$/);
      expect(location.searchParams.get('state')).to.match(/^[\w-]{43}$/);
      expect(location.searchParams.get('nonce')).to.match(/^[\w-]{43}$/);
    });

    it('sets an HttpOnly, SameSite=Lax login cookie for the callback path when it redirects', async () => {
      const response = await fetch(`${appUrl}/auth/idp/login?user_id=alice`, { redirect: 'manual' });
      const cookie = response.headers.getSetCookie().find((line) => line.startsWith('svc_oauth_'));
      expect(cookie).to.match(/^svc_oauth_[0-9a-f]{16}=[\w-]{43};/);
      expect(cookie).to.match(/; HttpOnly/i);
      expect(cookie).to.match(/; SameSite=Lax/i);
      expect(cookie).to.match(/; Path=\/auth\/idp\/callback/);
      expect(cookie).not.to.match(/; Secure/i);
    });

    it('refuses with 400 in the OpenAI error shape when user_id is missing', async () => {
      const response = await fetch(`${appUrl}/auth/idp/login`, { redirect: 'manual' });
      expect(response.status).to.equal(400);
      expect(await response.json()).to.deep.equal({
        error: {
          message: 'user_id is required (query parameter user_id or header X-User-ID)',
          type: 'invalid_request_error',
          param: 'user_id',
          code: 'invalid_request',
        },
      });
    });

    it('refuses with 400 when user_id is longer than 255 characters', async () => {
      const response = await fetch(`${appUrl}/auth/idp/login?user_id=${'u'.repeat(256)}`, { redirect: 'manual' });
      await expectRefused(response, /at most 255 characters/);
    });

    it('refuses with 400, not a database error, when user_id holds a NUL character', async () => {
      const response = await fetch(`${appUrl}/auth/idp/login?user_id=a%00b`, { redirect: 'manual' });
      await expectRefused(response, /must not contain NUL/);
    });
  });

  describe('GET /auth/idp/callback', () => {
    it('shows a self-contained connected page when the user completes login and consent', async () => {
      const response = await connect('carla');
      expect(response.headers.get('content-type')).to.match(/^text\/html/);
      const html = await response.text();
      expect(html).to.include('Account connected');
      expect(html).to.include('<code>carla</code>');
      expect(html).not.to.match(/\b(src|href)=|https?:\/\//);
    });

    it('clears the login cookie when the callback is handled', async () => {
      const { jar, callback } = await authorize('clara');
      expect(jar.names().filter((name) => name.startsWith('svc_oauth_'))).to.have.length(1);
      await jar.fetch(callback);
      expect(jar.names().filter((name) => name.startsWith('svc_oauth_'))).to.deep.equal([]);
    });

    it('stores the tokens encrypted, with no plaintext token in the row, when the account is connected', async () => {
      await connect('dora');
      const row = await rawRow('dora');
      expect(row).to.include({ user_id: 'dora', provider: 'idp', scope: SCOPES });
      const set = await storedTokenSet('dora');
      expect(set.refresh_token).to.be.a('string');
      const raw = JSON.stringify(row);
      expect(raw).not.to.include(set.access_token);
      expect(raw).not.to.include(set.refresh_token!);
      expect(row!.ciphertext).to.match(/^v1\./);
    });

    it('refuses a forged state', async () => {
      const { jar, callback } = await authorize('erin');
      const forged = new URL(callback);
      forged.searchParams.set('state', 'forged-state-value');
      await expectRefused(await jar.fetch(forged), /unknown, has expired or was already used/);
      expect(await tokens.get('erin', 'idp')).to.equal(undefined);
    });

    it('refuses a replayed callback', async () => {
      const { jar, callback } = await authorize('fred');
      expect((await jar.fetch(callback)).status).to.equal(200);
      const replay = await fetch(callback, { headers: { cookie: 'irrelevant=1' } });
      await expectRefused(replay, /unknown, has expired or was already used/);
    });

    it('refuses a callback without the login cookie, and spends the state', async () => {
      const { jar, callback } = await authorize('gina');
      await expectRefused(await fetch(callback), /not started in this browser/);
      expect(await tokens.get('gina', 'idp')).to.equal(undefined);
      // The browser that started it cannot use the state afterwards either.
      await expectRefused(await jar.fetch(callback), /unknown, has expired or was already used/);
    });

    it('refuses a callback whose login cookie comes from another login', async () => {
      const victim = await authorize('hank');
      const attacker = await authorize('ivan');
      const cookieName = victim.jar.names().find((name) => name.startsWith('svc_oauth_'))!;
      const attackerValue = attacker.jar.get(attacker.jar.names().find((name) => name.startsWith('svc_oauth_'))!)!;
      const response = await fetch(victim.callback, { headers: { cookie: `${cookieName}=${attackerValue}` } });
      await expectRefused(response, /not started in this browser/);
      expect(await tokens.get('hank', 'idp')).to.equal(undefined);
    });

    it('stores the tokens for the login user when the callback query names another user_id', async () => {
      const { jar, callback } = await authorize('jane');
      const tampered = new URL(callback);
      tampered.searchParams.set('user_id', 'mallory');
      expect((await jar.fetch(tampered)).status).to.equal(200);
      expect(await tokens.get('jane', 'idp')).not.to.equal(undefined);
      expect(await tokens.get('mallory', 'idp')).to.equal(undefined);
      expect(await vault.getAccessToken('mallory')).to.equal(null);
    });

    it('refuses with 400 when the user denies consent at the provider', async () => {
      const jar = new CookieJar();
      const callback = await authorizeInBrowser(jar, `${appUrl}/auth/idp/login?user_id=kate`, {
        account: 'kate-account',
        callbackPrefix: callbackUrl,
        abort: true,
      });
      expect(new URL(callback).searchParams.get('error')).to.equal('access_denied');
      await expectRefused(await jar.fetch(callback), /did not grant access: access_denied/);
      expect(await tokens.get('kate', 'idp')).to.equal(undefined);
    });

    it('refuses with 400, not a database error, when the state holds characters we never issue', async () => {
      await expectRefused(await fetch(`${callbackUrl}?state=a%00b&code=c`), /unknown, has expired or was already used/);
    });

    it('refuses with 400 when the state parameter is missing', async () => {
      await expectRefused(await fetch(`${callbackUrl}?code=abc`), /no state parameter/);
    });
  });

  describe('getAccessToken', () => {
    it('returns an access token the provider accepts when the user connected', async () => {
      await connect('lena', 'lena-at-idp');
      const token = await vault.getAccessToken('lena');
      expect(token).to.be.a('string');
      expect(await subjectOf(token!)).to.equal('lena-at-idp');
    });

    it('never returns one user’s token for another user', async () => {
      await connect('mona', 'mona-at-idp');
      await connect('nina', 'nina-at-idp');
      const [mona, nina] = await Promise.all([vault.getAccessToken('mona'), vault.getAccessToken('nina')]);
      expect(mona).not.to.equal(nina);
      expect(await subjectOf(mona!)).to.equal('mona-at-idp');
      expect(await subjectOf(nina!)).to.equal('nina-at-idp');
      expect(await vault.getAccessToken('nobody')).to.equal(null);
    });

    it('refreshes once, for all concurrent callers, when the token is about to expire', async () => {
      await connect('olga', 'olga-at-idp');
      const before = await storedTokenSet('olga');
      const refreshesBefore = provider.grants.refresh_token ?? 0;
      const eager = eagerVault();
      const results = await Promise.all(Array.from({ length: 5 }, () => eager.getAccessToken('olga')));
      expect(provider.grants.refresh_token ?? 0).to.equal(refreshesBefore + 1);
      expect(new Set(results).size).to.equal(1);
      expect(results[0]).not.to.equal(before.access_token);
      expect(await subjectOf(results[0]!)).to.equal('olga-at-idp');
      expect((await storedTokenSet('olga')).access_token).to.equal(results[0]);
    });

    it('returns null and forgets the account when the provider revoked the grant', async () => {
      await connect('pia');
      const { refresh_token: refreshToken } = await storedTokenSet('pia');
      await tokenRevocation(await oidc(), refreshToken!, { token_type_hint: 'refresh_token' });
      expect(await eagerVault().getAccessToken('pia')).to.equal(null);
      expect(await tokens.get('pia', 'idp')).to.equal(undefined);
    });
  });

  describe('/auth/idp/accounts', () => {
    it('lists the connected account when the user asks', async () => {
      await connect('quinn');
      const response = await fetch(`${appUrl}/auth/idp/accounts?user_id=quinn`);
      expect(response.status).to.equal(200);
      const body = (await response.json()) as { object: string; data: Array<Record<string, unknown>> };
      expect(body.object).to.equal('list');
      expect(body.data).to.have.length(1);
      expect(body.data[0]).to.include({ provider: 'idp', scope: SCOPES });
      expect(Date.parse(body.data[0]!.connected_at as string)).to.be.closeTo(Date.now(), 60_000);
      expect(Date.parse(body.data[0]!.expires_at as string)).to.be.greaterThan(Date.now());
    });

    it('identifies the user by X-User-ID when listing accounts', async () => {
      const response = await fetch(`${appUrl}/auth/idp/accounts`, { headers: { 'x-user-id': 'someone-new' } });
      expect(await response.json()).to.deep.equal({ object: 'list', data: [] });
    });

    it('disconnects: the row is gone and the grant is revoked at the provider', async () => {
      await connect('rosa');
      const { refresh_token: refreshToken } = await storedTokenSet('rosa');
      const response = await fetch(`${appUrl}/auth/idp/accounts?user_id=rosa`, { method: 'DELETE' });
      expect(await response.json()).to.deep.equal({ object: 'oauth_account', provider: 'idp', deleted: true });
      expect(await rawRow('rosa')).to.equal(undefined);
      expect(await vault.getAccessToken('rosa')).to.equal(null);
      let failure: unknown;
      await refreshTokenGrant(await oidc(), refreshToken!).catch((error: unknown) => (failure = error));
      expect(failure).to.be.instanceOf(ResponseBodyError);
      expect((failure as ResponseBodyError).error).to.equal('invalid_grant');
    });

    it('disconnects with POST /auth/idp/disconnect and reports false when nothing was connected', async () => {
      await connect('sara');
      const first = await fetch(`${appUrl}/auth/idp/disconnect`, { method: 'POST', body: JSON.stringify({ user_id: 'sara' }) });
      expect(await first.json()).to.include({ deleted: true });
      const second = await fetch(`${appUrl}/auth/idp/disconnect`, { method: 'POST', headers: { 'x-user-id': 'sara' } });
      expect(await second.json()).to.include({ deleted: false });
    });
  });
});

describe('OAuth routes when the provider is unreachable', () => {
  let server: Server;
  let appUrl: string;
  let database: Database;

  before(async function () {
    // The first embedded database of a test process runs initdb, and the provider generates its
    // keys: CPU-bound work that takes tens of seconds on a loaded 2-core machine.
    this.timeout(120_000);
    database = await createDatabase({ dataDir: 'memory://', vector: false, pgliteTemplate: await pgliteTemplate(false) });
    await migrateToLatest(database, { vector: false, embeddingDimensions: 3 });
    // A port that was just free: nothing answers there.
    const probe = createServer();
    const downIssuer = await listen(probe);
    await close(probe);
    const oidc = createOidcConfigurationSource({ issuerUrl: downIssuer, clientId: 'c', clientSecret: 's', allowInsecure: true, retryAfterMs: 0 });
    const tokens = createTokenRepository(database.db);
    server = createServer();
    appUrl = await listen(server);
    const vault = createTokenVault({ tokens, cipher: createTokenCipher(randomBytes(32)), oidc, refreshMarginMs: 1000, publicUrl: appUrl });
    const router = createAuthRouter({
      vault,
      states: createOAuthStateRepository(database.db),
      oidc,
      settings: { redirectUrl: `${appUrl}/auth/idp/callback`, scopes: SCOPES, stateTtlMs: 60_000, publicUrl: appUrl },
    });
    server.on('request', authApp(router));
  });

  after(async () => {
    if (server) await close(server);
    await database?.close();
  });

  it('answers 502 in the OpenAI error shape when login cannot reach the provider', async () => {
    const response = await fetch(`${appUrl}/auth/idp/login?user_id=alice`, { redirect: 'manual' });
    expect(response.status).to.equal(502);
    const body = (await response.json()) as ErrorBody;
    expect(body.error).to.include({ type: 'upstream_error', code: 'upstream_unavailable' });
    expect(body.error.message).to.match(/could not be reached for discovery/);
  });
});

describe('OAuth routes when no issuer is configured', () => {
  let server: Server;
  let appUrl: string;

  before(async () => {
    server = createServer(authApp(createAuthDisabledRouter()));
    appUrl = await listen(server);
  });

  after(async () => {
    if (server) await close(server);
  });

  for (const [method, path] of [
    ['GET', '/auth/idp/login?user_id=alice'],
    ['GET', '/auth/idp/callback?state=x&code=y'],
    ['GET', '/auth/idp/accounts?user_id=alice'],
    ['DELETE', '/auth/idp/accounts?user_id=alice'],
  ] as const) {
    it(`answers 501 saying OAuth is not configured for ${method} ${path.split('?')[0]}`, async () => {
      const response = await fetch(`${appUrl}${path}`, { method, redirect: 'manual' });
      expect(response.status).to.equal(501);
      const body = (await response.json()) as ErrorBody;
      expect(body.error).to.include({ type: 'not_implemented_error', code: 'not_implemented' });
      expect(body.error.message).to.match(/OAuth is not configured.*OAUTH_ISSUER_URL/);
    });
  }
});
