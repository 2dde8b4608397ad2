import type { RequestHandler } from 'express';
import { ServiceError } from '../../runtime/service-error.js';

/** Longest user and session id: the columns are varchar(255). */
export const MAX_ID_LENGTH = 255;

/**
 * Text no request may hold: NUL, which PostgreSQL's text and jsonb refuse, and a lone UTF-16
 * surrogate, which has no UTF-8 form (with the `u` flag a surrogate pair is one code point,
 * not of the category).
 */
const ILL_FORMED = /[\u0000\p{Cs}]/u;

/**
 * A session id comes back in the X-Session-ID response header, which a client echoes: only
 * printable ASCII survives that unchanged (Latin-1 goes out as UTF-8, a tab or a space at
 * either end is trimmed away).
 */
const SESSION_ID = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;

/** What is wrong with a text by the one rule every request is held to, or null when nothing is. */
export function textFault(text: string): string | null {
  const found = ILL_FORMED.exec(text);
  if (!found) return null;
  return found[0] === '\u0000' ? 'text must not contain NUL characters' : 'text must be valid Unicode, without a lone UTF-16 surrogate (such as \\ud800)';
}

/** Refuses a text that breaks the rule with a 400 naming `param`; returns it otherwise. */
export function checkText(text: string, param: string): string {
  const fault = textFault(text);
  if (fault !== null) throw new ServiceError('INVALID_REQUEST', `Invalid value for '${param}': ${fault}`, { param });
  return text;
}

/** True when `value` can be a session id: 1 to 255 printable ASCII characters, no space at either end. */
export function isSessionId(value: string): boolean {
  return value.length <= MAX_ID_LENGTH && SESSION_ID.test(value);
}

/** Why a value cannot be a session id, for the 400 that names it. */
export const SESSION_ID_RULE = `must be 1 to ${MAX_ID_LENGTH} printable ASCII characters, without a space at either end: it is sent back as it came in the X-Session-ID header`;

/** Refuses a session id (a header or a field) that would not come back unchanged in X-Session-ID. */
export function checkSessionId(value: string, param: string): string {
  if (!isSessionId(value)) throw new ServiceError('INVALID_REQUEST', `Invalid value for '${param}': ${SESSION_ID_RULE}`, { param });
  return value;
}

/** A path into a parsed JSON value as a request parameter is named: `messages[1].content`; the root is `body`. */
export function paramOf(path: readonly PropertyKey[]): string {
  return path.reduce<string>((text, key) => (typeof key === 'number' ? `${text}[${key}]` : text ? `${text}.${String(key)}` : String(key)), '') || 'body';
}

/** A node of a parsed JSON value still to visit, with the way back to the root (a list of whole paths would cost the square of the depth). */
type Visit = { node: unknown; key?: PropertyKey; parent?: Visit };

/**
 * The first key or string in a parsed JSON value that breaks the rule: its path and what is
 * wrong; null when none does. Iterative, as a body may nest deeper than the stack allows.
 */
export function findTextFault(value: unknown): { path: PropertyKey[]; fault: string } | null {
  const pending: Visit[] = [{ node: value }];
  while (pending.length > 0) {
    const visit = pending.pop()!;
    const { node } = visit;
    if (typeof node === 'string') {
      const fault = textFault(node);
      if (fault !== null) return { path: pathTo(visit), fault };
      continue;
    }
    if (node === null || typeof node !== 'object') continue;
    if (Array.isArray(node)) {
      for (let index = 0; index < node.length; index++) pending.push({ node: node[index], key: index, parent: visit });
      continue;
    }
    for (const [key, child] of Object.entries(node)) {
      const next: Visit = { node: child, key, parent: visit };
      const fault = textFault(key);
      if (fault !== null) return { path: pathTo(next), fault };
      pending.push(next);
    }
  }
  return null;
}

function pathTo(visit: Visit): PropertyKey[] {
  const path: PropertyKey[] = [];
  for (let at: Visit | undefined = visit; at?.key !== undefined; at = at.parent) path.push(at.key);
  return path.reverse();
}

/**
 * The one place the text rule is applied, before any route runs, so that no route can forget
 * it: every decoded path segment, every query parameter and every key and string of the JSON
 * body; and the X-Session-ID header, which every route that reads it takes as a session id.
 * A breach is a 400 `invalid_request_error` naming where it is (`path` for a path segment).
 */
export const holdToTextRules: RequestHandler = (req, _res, next) => {
  for (const segment of req.path.split('/')) {
    const text = decodedSegment(segment);
    const fault = text === undefined ? null : textFault(text);
    if (fault !== null) throw new ServiceError('INVALID_REQUEST', `Invalid value in the path segment ${JSON.stringify(text)}: ${fault}`, { param: 'path' });
  }
  refuseFaultIn(req.query);
  if (req.body !== undefined) refuseFaultIn(req.body);
  const sessionId = req.get('x-session-id');
  if (sessionId !== undefined) checkSessionId(sessionId, 'X-Session-ID');
  next();
};

function refuseFaultIn(value: unknown): void {
  const found = findTextFault(value);
  if (found === null) return;
  const param = paramOf(found.path);
  throw new ServiceError('INVALID_REQUEST', `Invalid value for '${param}': ${found.fault}`, { param });
}

/** A path segment as the router decodes it; undefined when it does not decode (the router answers that itself). */
function decodedSegment(segment: string): string | undefined {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** True when `value` can be a user or session id: 1 to 255 characters that keep the text rule. */
export function isValidIdentifier(value: string): boolean {
  return value.length > 0 && value.length <= MAX_ID_LENGTH && textFault(value) === null;
}

/**
 * Checks a user or session id to look up: 1 to 255 characters that keep the text rule (ids
 * from a path, query or body kept it already; a header or a route outside the API's may not).
 */
export function checkIdentifier(value: string, param: string): string {
  if (value.length === 0) throw new ServiceError('INVALID_REQUEST', `${param} must not be empty`, { param });
  checkText(value, param);
  if (value.length > MAX_ID_LENGTH) {
    throw new ServiceError('INVALID_REQUEST', `${param} must be at most ${MAX_ID_LENGTH} characters (got ${value.length})`, { param });
  }
  return value;
}
