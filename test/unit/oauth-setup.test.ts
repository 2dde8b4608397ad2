import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { ConfigError } from '../../config/load-config.js';
import type { AppConfig } from '../../config/load-config.js';
import { createOAuthSetup } from '../../gateway/auth/oauth-setup.js';
import type { OAuthStateStore, TokenStore } from '../../runtime/ports.js';

const OAUTH: AppConfig['oauth'] = {
  issuer_url: 'https://accounts.google.com',
  client_id: 'client.apps.googleusercontent.com',
  client_secret: 'secret',
  scopes: 'openid email',
  redirect_url: 'https://agents.example.com/auth/idp/callback',
  token_key: randomBytes(32).toString('base64'),
  state_ttl_ms: 600_000,
  login_link_ttl_ms: 600_000,
  refresh_margin_ms: 60_000,
  allow_insecure: false,
};

// Never called: the setup contacts nothing until a request comes.
const tokens = {} as TokenStore;
const states = {} as OAuthStateStore;

function setup(oauth: Partial<AppConfig['oauth']>) {
  return createOAuthSetup({ oauth: { ...OAUTH, ...oauth }, publicUrl: 'https://agents.example.com', tokens, states, requireLoginProof: true });
}

function configError(oauth: Partial<AppConfig['oauth']>): ConfigError {
  try {
    setup(oauth);
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('createOAuthSetup', () => {
  it('builds the vault and the routes without contacting the provider when an issuer is set', () => {
    const { vault, router } = setup({});
    expect(vault?.provider).to.equal('idp');
    const login = new URL(vault!.loginUrl('alice'));
    expect(`${login.origin}${login.pathname}`).to.equal('https://agents.example.com/auth/idp/login');
    expect([...login.searchParams.keys()]).to.deep.equal(['user_id', 'expires', 'sig']);
    expect(login.searchParams.get('user_id')).to.equal('alice');
    // Signed for the configured lifetime (10 minutes).
    expect(Number(login.searchParams.get('expires')) * 1000 - Date.now()).to.be.within(590_000, 601_000);
    expect(router).to.be.a('function');
  });

  it('gives no vault when no issuer is configured', () => {
    const { vault, router } = setup({ issuer_url: '', token_key: '' });
    expect(vault).to.equal(undefined);
    expect(router).to.be.a('function');
  });

  it('refuses a token key that is not 32 bytes when an issuer is set', () => {
    expect(configError({ token_key: randomBytes(16).toString('hex') }).message).to.match(/OAUTH_TOKEN_KEY.*32 bytes/);
  });

  it('refuses a missing token key when an issuer is set', () => {
    expect(configError({ token_key: '' }).message).to.match(/OAUTH_TOKEN_KEY.*empty/);
  });

  it('refuses a missing client id when an issuer is set', () => {
    expect(configError({ client_id: '' }).message).to.match(/OAUTH_CLIENT_ID/);
  });

  it('refuses an http issuer unless allow_insecure is set', () => {
    expect(configError({ issuer_url: 'http://127.0.0.1:9999' }).message).to.match(/OAUTH_ALLOW_INSECURE/);
    expect(setup({ issuer_url: 'http://127.0.0.1:9999', allow_insecure: true }).vault).not.to.equal(undefined);
  });

  it('refuses an issuer that is not an http(s) URL', () => {
    expect(configError({ issuer_url: 'accounts.google.com' }).message).to.match(/must be an http\(s\) URL/);
  });
});
