import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { Configuration, customFetch } from 'openid-client';
import type { CustomFetchOptions } from 'openid-client';
import type { RuntimeEvents } from '../../runtime/observability/event-bus.js';
import type { NewStoredToken, StoredToken, TokenStore } from '../../runtime/ports.js';
import { createTokenCipher } from '../../runtime/accounts/token-cipher.js';
import { createTokenVault } from '../../runtime/accounts/token-vault.js';
import type { TokenVaultOptions } from '../../runtime/accounts/token-vault.js';

const ISSUER = 'https://idp.test';
const NOW = Date.parse('2030-01-01T00:00:00Z');
const MARGIN = 60_000;

/** The TokenStore contract in memory. */
function memoryTokenStore(): TokenStore & { rows: Map<string, StoredToken> } {
  const rows = new Map<string, StoredToken>();
  const key = (userId: string, provider: string) => JSON.stringify([userId, provider]);
  return {
    rows,
    async get(userId, provider) {
      return rows.get(key(userId, provider));
    },
    async listByUser(userId) {
      return [...rows.values()].filter((row) => row.userId === userId);
    },
    async put(token: NewStoredToken) {
      const row = { ...token, createdAt: new Date(NOW), updatedAt: new Date(NOW) };
      rows.set(key(token.userId, token.provider), row);
      return row;
    },
    async replace(expected, token) {
      const row = rows.get(key(token.userId, token.provider));
      if (row?.ciphertext !== expected) return false;
      rows.set(key(token.userId, token.provider), { ...row, ...token, updatedAt: new Date(NOW) });
      return true;
    },
    async remove(userId, provider, expected) {
      const row = rows.get(key(userId, provider));
      if (!row || (expected !== undefined && row.ciphertext !== expected)) return false;
      return rows.delete(key(userId, provider));
    },
  };
}

type Handler = (url: string, body: URLSearchParams) => Response | Promise<Response>;

/** A provider whose token and revocation endpoints answer from the test's handler. */
function fakeProvider(handler: Handler) {
  const requests: Array<{ url: string; body: URLSearchParams }> = [];
  const config = new Configuration(
    { issuer: ISSUER, token_endpoint: `${ISSUER}/token`, revocation_endpoint: `${ISSUER}/revoke` },
    'client-1',
    'secret-1',
  );
  config[customFetch] = async (url: string, options: CustomFetchOptions) => {
    const body = new URLSearchParams(String(options.body));
    requests.push({ url, body });
    return handler(url, body);
  };
  return { config, requests };
}

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
}

function tokenResponse(accessToken: string, extra: Record<string, unknown> = {}): Response {
  return json(200, { access_token: accessToken, token_type: 'Bearer', expires_in: 3600, ...extra });
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => (resolve = done));
  return { promise, resolve };
}

describe('createTokenVault', () => {
  let tokens: ReturnType<typeof memoryTokenStore>;
  let events: Array<{ name: string; payload: unknown }>;
  let clock: number;
  const cipher = createTokenCipher(randomBytes(32));

  beforeEach(() => {
    tokens = memoryTokenStore();
    events = [];
    clock = NOW;
  });

  function vault(config: Configuration, options: Partial<TokenVaultOptions> = {}) {
    return createTokenVault({
      tokens,
      cipher,
      oidc: config,
      refreshMarginMs: MARGIN,
      publicUrl: 'http://localhost:1111',
      now: () => clock,
      events: {
        emit<Name extends keyof RuntimeEvents>(name: Name, payload: RuntimeEvents[Name]) {
          events.push({ name, payload });
        },
      },
      ...options,
    });
  }

  /** Stores alice's tokens, expiring in `expiresInS` seconds from the test clock. */
  async function connect(subject: ReturnType<typeof vault>, expiresInS: number, refreshToken: string | null = 'rt-1') {
    await subject.save('alice', {
      access_token: 'at-1',
      token_type: 'bearer',
      expires_in: expiresInS,
      ...(refreshToken ? { refresh_token: refreshToken } : {}),
      scope: 'openid email',
    });
  }

  it('returns null when the user never connected', async () => {
    const { config } = fakeProvider(() => tokenResponse('unused'));
    expect(await vault(config).getAccessToken('alice')).to.equal(null);
  });

  it('returns the stored token without asking the provider when it is not about to expire', async () => {
    const provider = fakeProvider(() => tokenResponse('at-2'));
    const subject = vault(provider.config);
    await connect(subject, 3600);
    expect(await subject.getAccessToken('alice')).to.equal('at-1');
    expect(provider.requests).to.have.length(0);
  });

  it('refreshes with the refresh token when the token expires within the margin', async () => {
    const provider = fakeProvider(() => tokenResponse('at-2', { refresh_token: 'rt-2' }));
    const subject = vault(provider.config);
    await connect(subject, 30);
    expect(await subject.getAccessToken('alice')).to.equal('at-2');
    expect(provider.requests).to.have.length(1);
    expect(provider.requests[0]!.body.get('grant_type')).to.equal('refresh_token');
    expect(provider.requests[0]!.body.get('refresh_token')).to.equal('rt-1');
    expect(events.map((event) => event.name)).to.include('oauth:refreshed');
  });

  it('stores the refreshed token so the next call does not refresh again', async () => {
    const provider = fakeProvider(() => tokenResponse('at-2'));
    const subject = vault(provider.config);
    await connect(subject, 30);
    await subject.getAccessToken('alice');
    expect(await subject.getAccessToken('alice')).to.equal('at-2');
    expect(provider.requests).to.have.length(1);
  });

  it('keeps the old refresh token when the provider does not rotate it', async () => {
    let next = 2;
    const provider = fakeProvider(() => tokenResponse(`at-${next++}`, { expires_in: 30 }));
    const subject = vault(provider.config);
    await connect(subject, 30);
    await subject.getAccessToken('alice');
    await subject.getAccessToken('alice');
    expect(provider.requests.map((request) => request.body.get('refresh_token'))).to.deep.equal(['rt-1', 'rt-1']);
  });

  it('makes one refresh request when concurrent callers need a refresh', async () => {
    const gate = deferred<void>();
    const provider = fakeProvider(async () => {
      await gate.promise;
      return tokenResponse('at-2');
    });
    const subject = vault(provider.config);
    await connect(subject, 30);
    const calls = Array.from({ length: 5 }, () => subject.getAccessToken('alice'));
    await new Promise((resolve) => setImmediate(resolve));
    gate.resolve();
    expect(await Promise.all(calls)).to.deep.equal(['at-2', 'at-2', 'at-2', 'at-2', 'at-2']);
    expect(provider.requests).to.have.length(1);
  });

  it('returns null and removes the row when the provider refuses the refresh token', async () => {
    const provider = fakeProvider(() => json(400, { error: 'invalid_grant', error_description: 'grant revoked' }));
    const subject = vault(provider.config);
    await connect(subject, 30);
    expect(await subject.getAccessToken('alice')).to.equal(null);
    expect(tokens.rows.size).to.equal(0);
    expect(events).to.deep.include({
      name: 'oauth:refresh_failed',
      payload: { userId: 'alice', provider: 'idp', reason: 'revoked', message: 'invalid_grant: grant revoked' },
    });
  });

  it('returns the old token and keeps the row when the provider is down and the token is still valid', async () => {
    const provider = fakeProvider(() => {
      throw new TypeError('fetch failed');
    });
    const subject = vault(provider.config);
    await connect(subject, 30);
    expect(await subject.getAccessToken('alice')).to.equal('at-1');
    expect(tokens.rows.size).to.equal(1);
    expect(events.find((event) => event.name === 'oauth:refresh_failed')?.payload).to.include({ reason: 'unavailable' });
  });

  it('returns null but keeps the row when the provider answers 500 and the token has expired', async () => {
    const provider = fakeProvider(() => new Response('oops', { status: 500 }));
    const subject = vault(provider.config);
    await connect(subject, 30);
    clock += 31_000;
    expect(await subject.getAccessToken('alice')).to.equal(null);
    expect(tokens.rows.size).to.equal(1);
  });

  it('returns null and removes the row when the token expired and there is no refresh token', async () => {
    const provider = fakeProvider(() => tokenResponse('unused'));
    const subject = vault(provider.config);
    await connect(subject, 30, null);
    expect(await subject.getAccessToken('alice')).to.equal('at-1');
    clock += 31_000;
    expect(await subject.getAccessToken('alice')).to.equal(null);
    expect(tokens.rows.size).to.equal(0);
    expect(provider.requests).to.have.length(0);
  });

  it('does not bring the tokens back when the user disconnects during a refresh', async () => {
    const gate = deferred<void>();
    const provider = fakeProvider(async (url) => {
      if (url.endsWith('/token')) await gate.promise;
      return url.endsWith('/token') ? tokenResponse('at-2') : new Response(null, { status: 200 });
    });
    const subject = vault(provider.config);
    await connect(subject, 30);
    const pending = subject.getAccessToken('alice');
    await new Promise((resolve) => setImmediate(resolve));
    expect(await subject.disconnect('alice')).to.equal(true);
    gate.resolve();
    expect(await pending).to.equal(null);
    expect(tokens.rows.size).to.equal(0);
  });

  it('rejects only the caller whose signal aborts while a refresh is running', async () => {
    const gate = deferred<void>();
    const provider = fakeProvider(async () => {
      await gate.promise;
      return tokenResponse('at-2');
    });
    const subject = vault(provider.config);
    await connect(subject, 30);
    const controller = new AbortController();
    const aborted = subject.getAccessToken('alice', controller.signal);
    const other = subject.getAccessToken('alice');
    await new Promise((resolve) => setImmediate(resolve));
    controller.abort(new Error('caller gave up'));
    let failure: unknown;
    await aborted.catch((error: unknown) => (failure = error));
    expect((failure as Error).message).to.equal('caller gave up');
    gate.resolve();
    expect(await other).to.equal('at-2');
  });

  it('never returns one user’s token to another user', async () => {
    const provider = fakeProvider(() => tokenResponse('unused'));
    const subject = vault(provider.config);
    await connect(subject, 3600);
    expect(await subject.getAccessToken('bob')).to.equal(null);
    // A row copied to another user does not decrypt for them.
    const row = tokens.rows.values().next().value!;
    await tokens.put({ userId: 'bob', provider: 'idp', ciphertext: row.ciphertext, expiresAt: row.expiresAt, scope: row.scope });
    expect(await subject.getAccessToken('bob')).to.equal(null);
    expect(events.map((event) => event.name)).to.include('oauth:token_unreadable');
  });

  it('lists the connected account with its times and scope when the user connected', async () => {
    const subject = vault(fakeProvider(() => tokenResponse('unused')).config);
    await connect(subject, 3600);
    expect(await subject.connected('alice')).to.deep.equal([
      { provider: 'idp', connected_at: new Date(NOW).toISOString(), expires_at: new Date(NOW + 3_600_000).toISOString(), scope: 'openid email' },
    ]);
    expect(await subject.connected('bob')).to.deep.equal([]);
  });

  it('removes the row and revokes the refresh token at the provider when the user disconnects', async () => {
    const provider = fakeProvider(() => new Response(null, { status: 200 }));
    const subject = vault(provider.config);
    await connect(subject, 3600);
    expect(await subject.disconnect('alice')).to.equal(true);
    expect(await subject.getAccessToken('alice')).to.equal(null);
    expect(provider.requests.map((request) => [request.url, request.body.get('token')])).to.deep.equal([[`${ISSUER}/revoke`, 'rt-1']]);
    expect(await subject.disconnect('alice')).to.equal(false);
  });

  it('still disconnects when the provider cannot revoke', async () => {
    const provider = fakeProvider(() => {
      throw new TypeError('fetch failed');
    });
    const subject = vault(provider.config);
    await connect(subject, 3600);
    expect(await subject.disconnect('alice')).to.equal(true);
    expect(tokens.rows.size).to.equal(0);
  });

  it('builds the login URL under the public URL with the user id encoded', () => {
    const subject = vault(fakeProvider(() => tokenResponse('unused')).config, { publicUrl: 'https://agents.example.com/svc' });
    expect(subject.loginUrl('a b&c')).to.equal('https://agents.example.com/svc/auth/idp/login?user_id=a+b%26c');
  });
});
