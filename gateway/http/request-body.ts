import { z } from 'zod';
import { ServiceError } from '../../runtime/service-error.js';
import { paramOf } from './text-rules.js';

/** Deepest nesting of a request body: a message's extra fields are kept in the session's state, whose copying recurses. */
const MAX_NESTING = 64;

/**
 * Validates a JSON request body against `schema`: an object, not nested too deeply, every
 * field as the schema says (its text was held to the text rules before any route ran). A bad
 * field is a 400 in the OpenAI error shape whose `param` names it.
 */
export function parseRequestBody<T>(schema: z.ZodType<T>, body: unknown): T {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ServiceError('INVALID_REQUEST', 'the request body must be a JSON object');
  }
  if (isNestedDeeperThan(body, MAX_NESTING)) {
    throw new ServiceError('INVALID_REQUEST', `the request body is nested too deeply: at most ${MAX_NESTING} levels of arrays and objects are accepted`);
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const param = paramOf(issue.path);
    throw new ServiceError('INVALID_REQUEST', `Invalid value for '${param}': ${describeIssue(issue)}`, { param });
  }
  return parsed.data;
}

/**
 * True when arrays and objects nest deeper than `limit` in a parsed JSON value. Iterative,
 * as the value may nest deeper than the stack allows.
 */
function isNestedDeeperThan(value: unknown, limit: number): boolean {
  const pending: Array<[unknown, number]> = [[value, 1]];
  while (pending.length > 0) {
    const [node, depth] = pending.pop()!;
    if (node === null || typeof node !== 'object') continue;
    if (depth > limit) return true;
    for (const child of Object.values(node)) pending.push([child, depth + 1]);
  }
  return false;
}

function describeIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === 'invalid_type') return `expected ${issue.expected}`;
  return issue.message;
}
