import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler, Response } from 'express';
import { ConfigError } from '../../config/load-config.js';
import { ServiceError } from '../../runtime/service-error.js';

/**
 * What a credential may do: `user`, a key bound to a user (acts as that user only); `admin`, a
 * key bound to no user (acts as any user, reads /metrics and every user's usage); `metrics`,
 * the metrics token (`metrics.token`), which reads /metrics and nothing else.
 */
export type CallerRole = 'user' | 'admin' | 'metrics';

/** Who made a request: the key it presented (by a short id of its hash), what it may do, and the user the key is bound to, if any. */
export type Caller = { keyId: string; role: CallerRole; userId?: string };

/** One configured credential, kept only as its SHA-256 hash. */
type StoredKey = { hash: Buffer; keyId: string; role: CallerRole; userId?: string };

/** What the API key middleware is built from. */
export type ApiKeySettings = {
  /** `auth.api_keys`: `KEY` / `KEY:user_id` entries, comma-separated; empty for local mode. */
  apiKeys: string;
  /** `metrics.token`: Prometheus's bearer token for /metrics (read only when API keys are set); empty for none. */
  metricsToken?: string;
};

/** The API key middleware built from `auth.api_keys`. */
export type ApiKeyGuard = {
  /** True when at least one key is configured (otherwise the service runs in local mode). */
  readonly enabled: boolean;
  /**
   * Runs on every request: resolves `res.locals.caller` from `Authorization: Bearer <key>`.
   * With keys configured every route but the browser legs of the OAuth login needs a valid
   * key, /metrics an operator's credential (the metrics token or an admin key: a user's key
   * is 403), and the metrics token opens nothing else (403). In local mode no key is read
   * (any placeholder key passes).
   */
  authenticate: RequestHandler;
  /** Guards routes that always need a key (the agent endpoints), even in local mode. */
  requireKey: RequestHandler;
};

/** Opened in a browser and protected by state + cookie: never asks for a key. */
const BROWSER_ROUTES = /^\/auth\/[^/]+\/(login|callback)\/?$/i;

/** What the operator reads, not the users: every user's figures. Spelt as Express matches routes (any case, a trailing slash). */
const OPERATOR_ROUTES = /^\/metrics\/?$/i;

/** Parses `KEY` / `KEY:user_id` entries, comma-separated; throws a ConfigError for a bad entry. */
export function parseApiKeys(value: string): Array<{ key: string; userId?: string }> {
  const entries: Array<{ key: string; userId?: string }> = [];
  for (const raw of value.split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    const colon = entry.indexOf(':');
    const key = (colon < 0 ? entry : entry.slice(0, colon)).trim();
    const userId = colon < 0 ? undefined : entry.slice(colon + 1).trim();
    if (key === '') throw new ConfigError('auth.api_keys (API_KEYS): an entry has an empty key');
    if (userId !== undefined && (userId === '' || userId.length > 255)) {
      throw new ConfigError('auth.api_keys (API_KEYS): KEY:user_id needs a user id of 1 to 255 characters');
    }
    entries.push(userId === undefined ? { key } : { key, userId });
  }
  return entries;
}

/**
 * Builds the API key middleware from `auth.api_keys` and `metrics.token`; the keys themselves
 * are not kept. Throws a ConfigError for a metrics token that is also an API key, or that
 * could not be sent as a bearer token.
 */
export function createApiKeyGuard(settings: ApiKeySettings): ApiKeyGuard {
  const entries = parseApiKeys(settings.apiKeys);
  const keys: StoredKey[] = entries.map(({ key, userId }) => {
    const hash = sha256(key);
    const keyId = `key_${hash.toString('hex').slice(0, 8)}`;
    return userId !== undefined ? { hash, keyId, role: 'user', userId } : { hash, keyId, role: 'admin' };
  });
  const enabled = keys.length > 0;
  const metricsToken = settings.metricsToken ?? '';
  // Without API keys nothing is read: /metrics answers this machine only, token or not.
  if (enabled && metricsToken !== '') {
    if (!/^\S+$/.test(metricsToken)) throw new ConfigError('metrics.token (METRICS_TOKEN) must not contain spaces: it is sent as Authorization: Bearer <token>');
    if (entries.some(({ key }) => key === metricsToken)) {
      throw new ConfigError('metrics.token (METRICS_TOKEN) is also an entry of auth.api_keys (API_KEYS): give Prometheus a token of its own');
    }
    keys.push({ hash: sha256(metricsToken), keyId: 'metrics_token', role: 'metrics' });
  }

  const find = (presented: string): StoredKey | undefined => {
    const hash = sha256(presented);
    let found: StoredKey | undefined;
    // Every key is compared, so the time taken does not say which one matched.
    for (const key of keys) if (timingSafeEqual(hash, key.hash) && !found) found = key;
    return found;
  };

  const authenticate: RequestHandler = (req, res, next) => {
    if (!enabled) return next();
    const presented = bearerToken(req.get('authorization'));
    // A browser sends no key: its login is checked by the route (signed link) and its callback by state and cookie.
    if (presented === undefined && BROWSER_ROUTES.test(req.path)) return next();
    if (presented === undefined) {
      throw new ServiceError('MISSING_API_KEY', 'You did not provide an API key. Send it in the Authorization header: Authorization: Bearer <API_KEY>.');
    }
    const key = find(presented);
    if (!key) throw new ServiceError('INVALID_API_KEY', 'Incorrect API key provided.');
    // The path from the app's root: this also runs inside routers mounted on a path (/inspect).
    const isOperatorRoute = OPERATOR_ROUTES.test(req.baseUrl + req.path);
    if (key.role === 'metrics' && !isOperatorRoute) {
      throw new ServiceError('FORBIDDEN', 'The metrics token (METRICS_TOKEN) opens /metrics only: use an API key here.');
    }
    if (key.role === 'user' && isOperatorRoute) {
      throw new ServiceError(
        'FORBIDDEN',
        "/metrics shows every user's figures: it needs the metrics token (METRICS_TOKEN) or an admin key (an API_KEYS entry bound to no user), not a key bound to a user.",
      );
    }
    res.locals.caller = { keyId: key.keyId, role: key.role, ...(key.userId !== undefined ? { userId: key.userId } : {}) } satisfies Caller;
    next();
  };

  const requireKey: RequestHandler = (_req, res, next) => {
    if (!enabled) {
      throw new ServiceError('MISSING_API_KEY', 'No API keys are configured on this service: the agent endpoints need one (set API_KEYS).');
    }
    if (!callerOf(res)) throw new ServiceError('MISSING_API_KEY', 'You did not provide an API key. Send it in the Authorization header: Authorization: Bearer <API_KEY>.');
    next();
  };

  return { enabled, authenticate, requireKey };
}

/** The caller resolved by the API key middleware, if any. */
export function callerOf(res: Response): Caller | undefined {
  return res.locals.caller as Caller | undefined;
}

/** True when the request came with an admin key (an API key bound to no user). */
export function isAdminCaller(res: Response): boolean {
  return callerOf(res)?.role === 'admin';
}

/**
 * The user a request acts as. `requested` are the user ids the request names (header, body,
 * query; undefined when absent), first one wins, unchecked (the caller checks it). A key
 * bound to a user acts as that user, and a request naming another user is refused (403).
 */
export function actingUser(res: Response, requested: Array<{ value: string | undefined; param: string }>): string | undefined {
  const bound = callerOf(res)?.userId;
  const named = requested.filter((entry): entry is { value: string; param: string } => entry.value !== undefined);
  if (bound === undefined) return named[0]?.value;
  const other = named.find((entry) => entry.value !== bound);
  if (other) {
    throw new ServiceError('FORBIDDEN', `This API key is bound to another user: it cannot act as the user named in ${other.param}.`, { param: other.param });
  }
  return bound;
}

function bearerToken(header: string | undefined): string | undefined {
  const match = header?.match(/^Bearer\s+(\S+)\s*$/i);
  return match?.[1];
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}
