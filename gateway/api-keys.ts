import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler, Response } from 'express';
import { ConfigError } from '../config/load-config.js';
import { ServiceError } from '../runtime/service-error.js';

/** Who made a request: the key it presented (by a short id of its hash) and the user the key is bound to, if any. */
export type Caller = { keyId: string; userId?: string };

/** One configured key, kept only as its SHA-256 hash. */
type StoredKey = { hash: Buffer; keyId: string; userId?: string };

/** The API key middleware built from `auth.api_keys`. */
export type ApiKeyGuard = {
  /** True when at least one key is configured (otherwise the service runs in local mode). */
  readonly enabled: boolean;
  /**
   * Runs on every request: resolves `res.locals.caller` from `Authorization: Bearer <key>`.
   * With keys configured every route but the browser legs of the OAuth login needs a valid
   * key; in local mode no key is read (any placeholder key passes).
   */
  authenticate: RequestHandler;
  /** Guards routes that always need a key (the agent endpoints), even in local mode. */
  requireKey: RequestHandler;
};

/** Opened in a browser and protected by state + cookie: never asks for a key. */
const BROWSER_ROUTES = /^\/auth\/[^/]+\/(login|callback)\/?$/i;

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

/** Builds the API key middleware from `auth.api_keys`; the keys themselves are not kept. */
export function createApiKeyGuard(apiKeys: string): ApiKeyGuard {
  const keys: StoredKey[] = parseApiKeys(apiKeys).map(({ key, userId }) => {
    const hash = sha256(key);
    return { hash, keyId: `key_${hash.toString('hex').slice(0, 8)}`, ...(userId !== undefined ? { userId } : {}) };
  });
  const enabled = keys.length > 0;

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
    res.locals.caller = { keyId: key.keyId, ...(key.userId !== undefined ? { userId: key.userId } : {}) } satisfies Caller;
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
