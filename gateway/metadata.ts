import { z } from 'zod';

/** Most metadata keys, and their keys' and values' longest lengths, as OpenAI allows. */
const MAX_METADATA_KEYS = 16;
const MAX_KEY_LENGTH = 64;
const MAX_VALUE_LENGTH = 512;

/** OpenAI's `metadata` (of a response or a conversation): string pairs, within OpenAI's bounds. */
export const Metadata = z
  .record(z.string().max(MAX_KEY_LENGTH), z.string().max(MAX_VALUE_LENGTH, `values must be at most ${MAX_VALUE_LENGTH} characters`), {
    error: (issue) => (issue.code === 'invalid_key' ? `keys must be at most ${MAX_KEY_LENGTH} characters` : undefined),
  })
  .refine((metadata) => Object.keys(metadata).length <= MAX_METADATA_KEYS, `at most ${MAX_METADATA_KEYS} keys are accepted`);
