import { z } from 'zod';

/** Most metadata keys, and their keys' and values' longest lengths, as OpenAI allows. */
const MAX_METADATA_KEYS = 16;
const MAX_KEY_LENGTH = 64;
const MAX_VALUE_LENGTH = 512;

/**
 * The one key a plain object cannot hold as data: zod's record (and any `object[key] = value`)
 * takes `__proto__` for the prototype and drops it. JSON.parse keeps it as an own key, so it
 * is seen here and refused instead of vanishing. `constructor`, `prototype` and the like are
 * ordinary own keys and are stored as sent.
 */
const PROTO_KEY = '__proto__';

const StringPairs = z
  .record(z.string().max(MAX_KEY_LENGTH), z.string().max(MAX_VALUE_LENGTH, `values must be at most ${MAX_VALUE_LENGTH} characters`), {
    error: (issue) => (issue.code === 'invalid_key' ? `keys must be at most ${MAX_KEY_LENGTH} characters` : undefined),
  })
  .refine((metadata) => Object.keys(metadata).length <= MAX_METADATA_KEYS, `at most ${MAX_METADATA_KEYS} keys are accepted`);

/** OpenAI's `metadata` (of a response or a conversation): string pairs, within OpenAI's bounds, no `__proto__` key. */
export const Metadata = z.preprocess((value, context) => {
  if (typeof value === 'object' && value !== null && Object.hasOwn(value, PROTO_KEY)) {
    context.addIssue({ code: 'custom', message: `the key ${PROTO_KEY} is not accepted`, path: [PROTO_KEY], input: value });
  }
  return value;
}, StringPairs);
