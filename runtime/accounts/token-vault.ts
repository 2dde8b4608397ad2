import { refreshTokenGrant, ResponseBodyError, tokenRevocation } from 'openid-client';
import type { Configuration, TokenEndpointResponse } from 'openid-client';
import { abortable } from '../abortable.js';
import type { EventBus } from '../observability/event-bus.js';
import type { LoginLinkSigner } from './login-links.js';
import type { OidcConfigurationSource } from './oidc-client.js';
import type { AccessTokenSource, NewStoredToken, StoredToken, TokenStore } from '../ports.js';
import type { TokenCipher } from './token-cipher.js';

/** One connected account of a user, as the accounts endpoint lists it. */
export type ConnectedAccount = {
  provider: string;
  /** ISO 8601: when the user (re)connected the account. */
  connected_at: string;
  /** ISO 8601 expiry of the current access token; null when the provider gave none. */
  expires_at: string | null;
  scope: string | null;
};

/** Per-user tokens of the identity provider: stored encrypted, refreshed on demand. */
export type TokenVault = AccessTokenSource & {
  /** The provider path segment (`idp`). */
  readonly provider: string;
  /** Stores the token endpoint's response for `userId`, replacing an earlier connection. */
  save(userId: string, response: TokenEndpointResponse): Promise<void>;
  /** The user's connected accounts (none or one per provider). */
  connected(userId: string): Promise<ConnectedAccount[]>;
  /** Forgets the user's tokens (and revokes them at the provider, best effort); false when there were none. */
  disconnect(userId: string): Promise<boolean>;
};

/** What the vault is built from. */
export type TokenVaultOptions = {
  tokens: TokenStore;
  cipher: TokenCipher;
  /** The openid-client Configuration, or the function that discovers it on first use. */
  oidc: Configuration | OidcConfigurationSource;
  /** A token expiring within this many ms is refreshed before it is handed out. */
  refreshMarginMs: number;
  /** The address users reach the service at (login URLs start with it). */
  publicUrl: string;
  /** Signs login URLs, so that a login link proves it was issued for its user (see the login route). */
  loginLinks?: LoginLinkSigner;
  /** Provider path segment and token row key (default `idp`). */
  provider?: string;
  events?: Pick<EventBus, 'emit'>;
  /** Revoke the tokens at the provider on disconnect when it has a revocation endpoint (default true). */
  revokeOnDisconnect?: boolean;
  /** The clock, in ms since the epoch (tests). */
  now?: () => number;
};

/** The secret part of a row, as encrypted. */
type TokenSet = { access_token: string; refresh_token?: string; token_type?: string };

/** Builds the token vault: the runtime's AccessTokenSource plus the OAuth routes' storage. */
export function createTokenVault(options: TokenVaultOptions): TokenVault {
  const { tokens, cipher, refreshMarginMs, events } = options;
  const provider = options.provider ?? 'idp';
  const now = options.now ?? Date.now;
  const revokeOnDisconnect = options.revokeOnDisconnect ?? true;
  const loginBase = new URL(`auth/${provider}/login`, options.publicUrl.endsWith('/') ? options.publicUrl : `${options.publicUrl}/`);
  /** One refresh at a time per user: concurrent callers share the promise. */
  const refreshing = new Map<string, Promise<string | null>>();

  const configuration = (): Promise<Configuration> =>
    typeof options.oidc === 'function' ? options.oidc() : Promise.resolve(options.oidc);

  const seal = (userId: string, set: TokenSet, expiresAt: Date | null, scope: string | null): NewStoredToken => ({
    userId,
    provider,
    ciphertext: cipher.encrypt(JSON.stringify(set), { userId, provider }),
    expiresAt,
    scope,
  });

  /** The row's token set, or undefined (reported) when it cannot be decrypted. */
  const open = (row: StoredToken): TokenSet | undefined => {
    try {
      const set = JSON.parse(cipher.decrypt(row.ciphertext, { userId: row.userId, provider })) as TokenSet;
      if (typeof set.access_token !== 'string') throw new Error('The stored token set has no access token.');
      return set;
    } catch (error) {
      // Not deleted: a wrong token_key would otherwise wipe every user's connection.
      events?.emit('oauth:token_unreadable', { userId: row.userId, provider, message: error instanceof Error ? error.message : String(error) });
      return undefined;
    }
  };

  const isValid = (row: StoredToken) => row.expiresAt === null || row.expiresAt.getTime() > now();
  const isDue = (row: StoredToken) => row.expiresAt !== null && row.expiresAt.getTime() - now() <= refreshMarginMs;
  const expiryOf = (response: TokenEndpointResponse) =>
    typeof response.expires_in === 'number' && Number.isFinite(response.expires_in) ? new Date(now() + response.expires_in * 1000) : null;

  /** What is stored now, without refreshing: after a race lost to a reconnect, refresh or disconnect. */
  const current = async (userId: string): Promise<string | null> => {
    const row = await tokens.get(userId, provider);
    const set = row && isValid(row) ? open(row) : undefined;
    return set?.access_token ?? null;
  };

  const refresh = async (userId: string): Promise<string | null> => {
    // Read again inside the flight: a refresh that finished meanwhile makes this one unnecessary.
    const row = await tokens.get(userId, provider);
    if (!row) return null;
    const set = open(row);
    if (!set) return null;
    if (!isDue(row)) return set.access_token;
    if (!set.refresh_token) {
      if (isValid(row)) return set.access_token;
      if (await tokens.remove(userId, provider, row.ciphertext)) {
        events?.emit('oauth:refresh_failed', { userId, provider, reason: 'no_refresh_token', message: 'The access token expired and there is no refresh token.' });
        return null;
      }
      return current(userId);
    }

    const started = now();
    let response: TokenEndpointResponse;
    try {
      response = await refreshTokenGrant(await configuration(), set.refresh_token);
    } catch (error) {
      const message = describe(error);
      if (isRevoked(error)) {
        if (await tokens.remove(userId, provider, row.ciphertext)) {
          events?.emit('oauth:refresh_failed', { userId, provider, reason: 'revoked', message });
          return null;
        }
        // The row changed while we asked (another process refreshed, or the user reconnected).
        return current(userId);
      }
      events?.emit('oauth:refresh_failed', { userId, provider, reason: 'unavailable', message });
      return isValid(row) ? set.access_token : null;
    }

    const next: TokenSet = {
      access_token: response.access_token,
      // Providers that do not rotate refresh tokens (Google) send none back: keep the old one.
      refresh_token: response.refresh_token ?? set.refresh_token,
      token_type: response.token_type ?? set.token_type,
    };
    const replaced = await tokens.replace(row.ciphertext, seal(userId, next, expiryOf(response), response.scope ?? row.scope));
    if (!replaced) return current(userId);
    events?.emit('oauth:refreshed', { userId, provider, durationMs: now() - started });
    return next.access_token;
  };

  return {
    provider,

    async getAccessToken(userId: string, signal?: AbortSignal): Promise<string | null> {
      signal?.throwIfAborted();
      const row = await tokens.get(userId, provider);
      if (!row) return null;
      if (!isDue(row)) return open(row)?.access_token ?? null;
      let flight = refreshing.get(userId);
      if (!flight) {
        flight = refresh(userId).finally(() => refreshing.delete(userId));
        refreshing.set(userId, flight);
      }
      // A caller that gives up does not cancel the refresh the others wait for.
      return abortable(flight, signal);
    },

    loginUrl(userId: string): string {
      const url = new URL(loginBase);
      url.searchParams.set('user_id', userId);
      const proof = options.loginLinks?.sign(userId, now());
      if (proof) {
        url.searchParams.set('expires', String(proof.expires));
        url.searchParams.set('sig', proof.sig);
      }
      return url.href;
    },

    async save(userId: string, response: TokenEndpointResponse): Promise<void> {
      if (typeof response.access_token !== 'string' || response.access_token === '') {
        throw new Error('The token response holds no access token.');
      }
      const set: TokenSet = { access_token: response.access_token, refresh_token: response.refresh_token, token_type: response.token_type };
      await tokens.put(seal(userId, set, expiryOf(response), response.scope ?? null));
      events?.emit('oauth:connected', { userId, provider });
    },

    async connected(userId: string): Promise<ConnectedAccount[]> {
      const rows = await tokens.listByUser(userId);
      return rows
        .filter((row) => row.provider === provider)
        .map((row) => ({
          provider: row.provider,
          connected_at: row.createdAt.toISOString(),
          expires_at: row.expiresAt?.toISOString() ?? null,
          scope: row.scope,
        }));
    },

    async disconnect(userId: string): Promise<boolean> {
      const row = await tokens.get(userId, provider);
      if (!row) return false;
      const removed = await tokens.remove(userId, provider);
      if (!removed) return false;
      events?.emit('oauth:disconnected', { userId, provider });
      if (revokeOnDisconnect) await revoke(row);
      return true;
    },
  };

  /** Best effort: the connection is gone here whatever the provider answers. */
  async function revoke(row: StoredToken): Promise<void> {
    const set = open(row);
    if (!set) return;
    try {
      const config = await configuration();
      if (!config.serverMetadata().revocation_endpoint) return;
      // Revoking the refresh token ends the grant (RFC 7009 §2.1); the access token goes with it at most providers.
      if (set.refresh_token) await tokenRevocation(config, set.refresh_token, { token_type_hint: 'refresh_token' });
      else await tokenRevocation(config, set.access_token, { token_type_hint: 'access_token' });
    } catch {
      // The provider is down or refuses: the token expires on its own.
    }
  }
}

/** The provider's own words when it gave any, without any token. */
function describe(error: unknown): string {
  if (error instanceof ResponseBodyError) return error.error_description ? `${error.error}: ${error.error_description}` : error.error;
  return error instanceof Error ? error.message : String(error);
}

/** The provider refused the refresh token itself: the user must connect again. */
function isRevoked(error: unknown): boolean {
  return error instanceof ResponseBodyError && error.error === 'invalid_grant';
}
