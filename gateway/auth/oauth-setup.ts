import type { Router } from 'express';
import { ConfigError } from '../../config/load-config.js';
import type { AppConfig } from '../../config/load-config.js';
import type { EventBus } from '../../runtime/observability/event-bus.js';
import { createOidcConfigurationSource } from '../../runtime/accounts/oidc-client.js';
import type { OAuthStateStore, TokenStore } from '../../runtime/ports.js';
import { createLoginLinkSigner } from '../../runtime/accounts/login-links.js';
import { createTokenCipher, parseTokenKey } from '../../runtime/accounts/token-cipher.js';
import { createTokenVault } from '../../runtime/accounts/token-vault.js';
import type { TokenVault } from '../../runtime/accounts/token-vault.js';
import { createAuthDisabledRouter, createAuthRouter } from './auth-routes.js';

/** What the composition root wires: the `/auth/idp` routes, and the vault per-user tools take tokens from. */
export type OAuthSetup = {
  router: Router;
  /** Absent when no issuer is configured (the routes then answer 501). */
  vault?: TokenVault;
};

/** What the OAuth pieces are built from. */
export type OAuthSetupOptions = {
  oauth: AppConfig['oauth'];
  /** `app.public_url`. */
  publicUrl: string;
  tokens: TokenStore;
  states: OAuthStateStore;
  events?: EventBus;
  /** API keys are set: a login must prove its user (a signed link or the user's key). */
  requireLoginProof: boolean;
};

/**
 * Builds the token vault and the OAuth routes from the settings. Throws a ConfigError for
 * settings that cannot work (missing client id, bad token key, http issuer without
 * allow_insecure); the provider itself is only contacted on first use.
 */
export function createOAuthSetup(options: OAuthSetupOptions): OAuthSetup {
  const { oauth } = options;
  const issuerUrl = oauth.issuer_url.trim();
  if (issuerUrl === '') return { router: createAuthDisabledRouter() };

  if (!URL.canParse(issuerUrl) || !/^https?:$/.test(new URL(issuerUrl).protocol)) {
    throw new ConfigError('oauth.issuer_url (OAUTH_ISSUER_URL): must be an http(s) URL, or empty to switch OAuth off');
  }
  if (new URL(issuerUrl).protocol === 'http:' && !oauth.allow_insecure) {
    throw new ConfigError('oauth.issuer_url (OAUTH_ISSUER_URL): an http:// issuer needs oauth.allow_insecure (OAUTH_ALLOW_INSECURE=true), for development only');
  }
  if (oauth.client_id.trim() === '') throw new ConfigError('oauth.client_id (OAUTH_CLIENT_ID): required when oauth.issuer_url is set');
  let tokenKey: Buffer;
  try {
    tokenKey = parseTokenKey(oauth.token_key);
  } catch (error) {
    throw new ConfigError(error instanceof Error ? error.message : String(error));
  }
  const cipher = createTokenCipher(tokenKey);
  const loginLinks = createLoginLinkSigner(tokenKey, oauth.login_link_ttl_ms);

  const oidc = createOidcConfigurationSource({
    issuerUrl,
    clientId: oauth.client_id,
    clientSecret: oauth.client_secret,
    allowInsecure: oauth.allow_insecure,
  });
  const vault = createTokenVault({
    tokens: options.tokens,
    cipher,
    oidc,
    refreshMarginMs: oauth.refresh_margin_ms,
    publicUrl: options.publicUrl,
    events: options.events,
    loginLinks,
  });
  const router = createAuthRouter({
    vault,
    states: options.states,
    oidc,
    loginLinks: options.requireLoginProof ? loginLinks : undefined,
    settings: { redirectUrl: oauth.redirect_url, scopes: oauth.scopes, stateTtlMs: oauth.state_ttl_ms, publicUrl: options.publicUrl },
  });
  return { router, vault };
}
