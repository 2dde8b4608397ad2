import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { Router } from 'express';
import type { CookieOptions, Request, Response } from 'express';
import {
  AuthorizationResponseError,
  authorizationCodeGrant,
  buildAuthorizationUrl,
  calculatePKCECodeChallenge,
  ClientError,
  randomNonce,
  randomPKCECodeVerifier,
  randomState,
  ResponseBodyError,
} from 'openid-client';
import type { TokenEndpointResponse } from 'openid-client';
import type { LoginLinkSigner } from '../../runtime/accounts/login-links.js';
import type { OidcConfigurationSource } from '../../runtime/accounts/oidc-client.js';
import type { OAuthStateStore } from '../../runtime/ports.js';
import { ServiceError } from '../../runtime/service-error.js';
import type { TokenVault } from '../../runtime/accounts/token-vault.js';
import { actingUser, callerOf } from '../http/api-keys.js';
import { checkIdentifier, MAX_ID_LENGTH } from '../http/text-rules.js';

/** How the OAuth routes talk to the provider and the browser. */
export type AuthRouterSettings = {
  /** The callback URL registered with the provider (`oauth.redirect_url`). */
  redirectUrl: string;
  /** Scopes asked for, space-separated (`oauth.scopes`). */
  scopes: string;
  /** How long a login may take, in ms (`oauth.state_ttl_ms`). */
  stateTtlMs: number;
  /** The address users reach the service at (`app.public_url`): https makes the login cookie Secure. */
  publicUrl: string;
  /**
   * Extra authorization request parameters. Default `prompt=consent` and
   * `access_type=offline`, so that Google (and OpenID `offline_access`) hand out a refresh
   * token; providers ignore parameters they do not know.
   */
  authorizationParams?: Record<string, string>;
};

/** What the OAuth routes are built from. */
export type AuthRouterDeps = {
  vault: TokenVault;
  states: OAuthStateStore;
  oidc: OidcConfigurationSource;
  settings: AuthRouterSettings;
  /**
   * Set when API keys are: a login then starts only for a caller who proves to be its user,
   * with the user's key (an unbound key may act for anyone) or a link these signed for that
   * user (the one in a tool_auth_required error). Absent (local mode): anyone names the user.
   */
  loginLinks?: LoginLinkSigner;
};

const DEFAULT_AUTHORIZATION_PARAMS = { prompt: 'consent', access_type: 'offline' };
const COOKIE_PREFIX = 'svc_oauth_';
const STATE_ERROR =
  'This login is unknown, has expired or was already used. Start again from the login link.';
const BINDING_ERROR =
  'This login was not started in this browser (its login cookie is missing or does not match). Start again from the login link in this browser.';

/**
 * `/auth/<provider>/login`, `/callback`, `/accounts` and `/disconnect`: the authorization
 * code flow with PKCE, state and nonce, bound to the browser that started it.
 */
export function createAuthRouter(deps: AuthRouterDeps): Router {
  const { vault, states, oidc, settings } = deps;
  const base = `/auth/${vault.provider}`;
  const redirectUrl = new URL(settings.redirectUrl);
  const wantsIdToken = settings.scopes.split(/\s+/).includes('openid');
  const cookieOptions: CookieOptions = {
    httpOnly: true,
    sameSite: 'lax',
    secure: new URL(settings.publicUrl).protocol === 'https:',
    // The cookie only has to reach the callback, as the browser addresses it.
    path: redirectUrl.pathname,
  };
  const router = Router();

  router.get(`${base}/login`, async (req, res) => {
    const userId = requireUserId(req, res);
    // Checked before anything is stored or the provider is asked.
    if (deps.loginLinks && !callerOf(res)) checkLoginLink(req, userId, deps.loginLinks);
    const config = await oidc();
    const state = randomState();
    const nonce = wantsIdToken ? randomNonce() : null;
    const codeVerifier = randomPKCECodeVerifier();
    const browserSecret = randomBytes(32).toString('base64url');
    await states.purgeExpired();
    await states.create({
      state,
      userId,
      provider: vault.provider,
      codeVerifier,
      nonce,
      browserBinding: sha256(browserSecret),
      expiresAt: new Date(Date.now() + settings.stateTtlMs),
    });
    const url = buildAuthorizationUrl(config, {
      ...(settings.authorizationParams ?? DEFAULT_AUTHORIZATION_PARAMS),
      redirect_uri: redirectUrl.href,
      scope: settings.scopes,
      state,
      ...(nonce ? { nonce } : {}),
      code_challenge: await calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: 'S256',
    });
    // One cookie per login, so two logins in two tabs do not undo each other.
    res.cookie(cookieName(state), browserSecret, { ...cookieOptions, maxAge: settings.stateTtlMs });
    res.set('Cache-Control', 'no-store');
    res.redirect(302, url.href);
  });

  router.get(`${base}/callback`, async (req, res) => {
    const state = singleQueryValue(req, 'state');
    if (!state) throw new ServiceError('INVALID_REQUEST', 'The callback has no state parameter.', { param: 'state' });
    // States are ours (base64url): anything else was never issued, and must not reach the database as is.
    if (state.length > MAX_ID_LENGTH || !/^[\w-]+$/.test(state)) throw new ServiceError('INVALID_REQUEST', STATE_ERROR, { param: 'state' });
    const name = cookieName(state);
    const browserSecret = readCookie(req, name);
    res.clearCookie(name, cookieOptions);
    res.set('Cache-Control', 'no-store');

    // Taken before anything else is checked: whatever happens next, this state is spent.
    const pending = await states.consume(state);
    if (!pending || pending.provider !== vault.provider) throw new ServiceError('INVALID_REQUEST', STATE_ERROR, { param: 'state' });
    if (!browserSecret || !sameHash(sha256(browserSecret), pending.browserBinding)) {
      throw new ServiceError('INVALID_REQUEST', BINDING_ERROR, { param: 'state' });
    }

    const config = await oidc();
    let tokens: TokenEndpointResponse;
    try {
      tokens = await authorizationCodeGrant(config, callbackUrl(redirectUrl, req), {
        pkceCodeVerifier: pending.codeVerifier,
        expectedState: pending.state,
        ...(pending.nonce ? { expectedNonce: pending.nonce } : {}),
        idTokenExpected: pending.nonce !== null,
      });
    } catch (error) {
      throw callbackError(error);
    }
    // The user the login was started for; a user_id in the callback query means nothing.
    await vault.save(pending.userId, tokens);
    sendPage(res, 200, 'Account connected', `Your account is now connected for user <code>${escapeHtml(pending.userId)}</code>. You can close this window and return to the chat.`);
  });

  router.get(`${base}/accounts`, async (req, res) => {
    const userId = requireUserId(req, res);
    res.json({ object: 'list', data: await vault.connected(userId) });
  });

  const disconnect = async (req: Request, res: Response) => {
    const userId = requireUserId(req, res);
    res.json({ object: 'oauth_account', provider: vault.provider, deleted: await vault.disconnect(userId) });
  };
  router.delete(`${base}/accounts`, disconnect);
  router.post(`${base}/disconnect`, disconnect);

  return router;
}

/** The `/auth/<provider>` routes when no issuer is configured: 501 in the OpenAI error shape. */
export function createAuthDisabledRouter(provider = 'idp'): Router {
  const router = Router();
  const notConfigured = () => {
    throw new ServiceError(
      'NOT_IMPLEMENTED',
      'OAuth is not configured on this service: set oauth.issuer_url (OAUTH_ISSUER_URL), oauth.client_id, oauth.client_secret and oauth.token_key to let users connect accounts.',
    );
  };
  router.all(`/auth/${provider}`, notConfigured);
  router.all(`/auth/${provider}/{*rest}`, notConfigured);
  return router;
}

/**
 * The user as the service identifies users: `X-User-ID`, else body `user_id`, else query
 * `user_id`. A key bound to a user acts as that user and may not name another.
 */
function requireUserId(req: Request, res: Response): string {
  const bound = boundUser(req, res);
  if (bound !== undefined) return bound;
  const header = req.get('x-user-id');
  if (header !== undefined) return checkUserId(header, 'X-User-ID');
  const fromBody = userIdInBody(req);
  if (fromBody !== undefined) {
    return checkUserId(fromBody, 'user_id');
  }
  const fromQuery = singleQueryValue(req, 'user_id');
  if (fromQuery === undefined) throw new ServiceError('INVALID_REQUEST', 'user_id is required (query parameter user_id or header X-User-ID)', { param: 'user_id' });
  return checkUserId(fromQuery, 'user_id');
}

/**
 * Refuses a login that neither a key nor a valid signed link vouches for: whoever completed
 * it would connect their own provider account to the named user.
 */
function checkLoginLink(req: Request, userId: string, links: LoginLinkSigner): void {
  const expires = singleQueryValue(req, 'expires');
  const sig = singleQueryValue(req, 'sig');
  if (expires === undefined || sig === undefined) {
    throw new ServiceError(
      'UNAUTHORIZED',
      'Starting a login needs the signed link from the tool_auth_required error (with expires and sig), or the API key of the user (Authorization: Bearer <key>).',
      { param: 'sig' },
    );
  }
  if (!/^\d{1,15}$/.test(expires) || !links.verify(userId, Number(expires), sig)) {
    throw new ServiceError('FORBIDDEN', 'This login link is not valid for this user or has expired: get a new one by using the tool again.', { param: 'sig' });
  }
}

/** The bound user of the caller's key, after checking that the request names no other user. */
function boundUser(req: Request, res: Response): string | undefined {
  if (res.locals.caller?.userId === undefined) return undefined;
  const fromBody = userIdInBody(req);
  const fromQuery = req.query.user_id;
  return actingUser(res, [
    { value: req.get('x-user-id'), param: 'X-User-ID' },
    { value: fromBody, param: 'user_id' },
    { value: fromQuery === undefined ? undefined : String(fromQuery), param: 'user_id' },
  ]);
}

/** The body's user_id, refused unless a string (never turned into one: String() of a deeply nested array overflows the stack). */
function userIdInBody(req: Request): string | undefined {
  const value: unknown = isRecord(req.body) ? req.body.user_id : undefined;
  if (value !== undefined && typeof value !== 'string') throw new ServiceError('INVALID_REQUEST', 'user_id must be a string', { param: 'user_id' });
  return value;
}

function checkUserId(value: string, param: string): string {
  // PostgreSQL text cannot hold NUL: refused here rather than failing in the database.
  if (value.includes('\u0000')) throw new ServiceError('INVALID_REQUEST', `${param} must not contain NUL characters`, { param });
  return checkIdentifier(value, param);
}

function singleQueryValue(req: Request, name: string): string | undefined {
  const value = req.query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new ServiceError('INVALID_REQUEST', `${name} must be given once, as a string`, { param: name });
  return value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The callback as the provider addressed it: the registered redirect URL with the query we received. */
function callbackUrl(redirectUrl: URL, req: Request): URL {
  const url = new URL(redirectUrl);
  const query = req.originalUrl.indexOf('?');
  url.search = query < 0 ? '' : req.originalUrl.slice(query);
  return url;
}

function cookieName(state: string): string {
  return COOKIE_PREFIX + sha256(state).slice(0, 16);
}

function readCookie(req: Request, name: string): string | undefined {
  for (const pair of (req.get('cookie') ?? '').split(';')) {
    const separator = pair.indexOf('=');
    if (separator > 0 && pair.slice(0, separator).trim() === name) return pair.slice(separator + 1).trim();
  }
  return undefined;
}

function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

function sameHash(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  return left.length === right.length && timingSafeEqual(left, right);
}

/** Maps what the code exchange throws: the provider's refusals and bad answers are 400, an unreachable provider 502. */
function callbackError(error: unknown): unknown {
  if (error instanceof ServiceError) return error;
  if (error instanceof AuthorizationResponseError) {
    const description = error.error_description ? ` (${error.error_description})` : '';
    return new ServiceError('INVALID_REQUEST', `The identity provider did not grant access: ${error.error}${description}.`, { cause: error });
  }
  if (error instanceof ResponseBodyError) {
    if (error.error === 'invalid_grant') {
      return new ServiceError('INVALID_REQUEST', 'The identity provider refused the authorization code (invalid_grant). Start again from the login link.', {
        cause: error,
      });
    }
    return new ServiceError('UPSTREAM_UNAVAILABLE', `The identity provider refused the token request: ${error.error}.`, { cause: error });
  }
  if (error instanceof ClientError) {
    if (error.code === 'OAUTH_RESPONSE_IS_NOT_CONFORM' || error.code === 'OAUTH_RESPONSE_IS_NOT_JSON') {
      return new ServiceError('UPSTREAM_UNAVAILABLE', `The identity provider answered the token request unexpectedly: ${error.message}.`, { cause: error });
    }
    return new ServiceError('INVALID_REQUEST', `The identity provider's response failed validation: ${error.message}.`, { cause: error });
  }
  if (error instanceof TypeError || (error instanceof DOMException && (error.name === 'TimeoutError' || error.name === 'AbortError'))) {
    return new ServiceError('UPSTREAM_UNAVAILABLE', `The identity provider could not be reached: ${error.message}.`, { cause: error });
  }
  return error;
}

function sendPage(res: Response, status: number, title: string, body: string): void {
  res
    .status(status)
    .set({
      'Content-Type': 'text/html; charset=utf-8',
      // The page loads nothing from anywhere; the callback URL (with its spent code) is not passed on.
      'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'",
      'Referrer-Policy': 'no-referrer',
    })
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
        `<title>${escapeHtml(title)}</title><style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#222}</style></head>` +
        `<body><h1>${escapeHtml(title)}</h1><p>${body}</p></body></html>`,
    );
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}
