import { toJsonText } from './json-text.js';

/**
 * The fields of a response object that hold these values unless its request or its turn
 * set them (as `responseBody` in gateway/responses-format.ts makes them): a stored body leaves
 * them out, and reading it fills them in again.
 */
const DEFAULTS: Readonly<Record<string, unknown>> = {
  object: 'response',
  background: false,
  error: null,
  incomplete_details: null,
  instructions: null,
  max_output_tokens: null,
  metadata: {},
  parallel_tool_calls: true,
  previous_response_id: null,
  conversation: null,
  reasoning: { effort: null, summary: null },
  store: true,
  temperature: null,
  text: { format: { type: 'text' } },
  tool_choice: 'auto',
  tools: [],
  top_p: null,
  truncation: 'disabled',
};

/** The defaults as JSON text: SQL that builds a whole body from a stored one (`defaults || body`) is given it. */
export const RESPONSE_BODY_DEFAULTS_JSON = JSON.stringify(DEFAULTS);

/** Each default's JSON text, which an object value is compared with. */
const DEFAULT_TEXTS = new Map(Object.entries(DEFAULTS).map(([key, value]) => [key, JSON.stringify(value)]));

/** The fields of a response object in the order OpenAI's schema lists them, which a body read back has. */
const FIELD_ORDER = [
  'id',
  'object',
  'created_at',
  'status',
  'background',
  'error',
  'incomplete_details',
  'instructions',
  'max_output_tokens',
  'metadata',
  'model',
  'output',
  'parallel_tool_calls',
  'previous_response_id',
  'conversation',
  'reasoning',
  'store',
  'temperature',
  'text',
  'tool_choice',
  'tools',
  'top_p',
  'truncation',
  'usage',
  'user',
];

/**
 * A response object as the `body` column keeps it: JSON text without its id (the row's key)
 * and without the fields that hold their defaults, some 450 of a body's 1,450 bytes in a
 * turn that sets none of them. A response row is written with every Responses API turn, and
 * its bytes are most of what such a turn adds to the database's work over a chat turn.
 */
export function storedResponseBody(body: Readonly<Record<string, unknown>>): string {
  const stored: Record<string, unknown> = {};
  for (const key in body) {
    if (key === 'id') continue;
    const value = body[key];
    const fallback = DEFAULT_TEXTS.get(key);
    if (fallback !== undefined && (value === DEFAULTS[key] || (typeof value === 'object' && value !== null && JSON.stringify(value) === fallback))) continue;
    stored[key] = value;
  }
  return toJsonText(stored);
}

/**
 * The response object of a stored body: its id, the defaults it left out, and its own fields,
 * in the schema's order. A body stored whole (before bodies were stored without their
 * defaults) reads back as it was.
 */
export function responseBodyOf(id: string, stored: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const defaults = JSON.parse(RESPONSE_BODY_DEFAULTS_JSON) as Record<string, unknown>;
  const body: Record<string, unknown> = {};
  for (const key of FIELD_ORDER) {
    const value = key === 'id' ? id : key in stored ? stored[key] : defaults[key];
    if (value !== undefined) body[key] = value;
  }
  for (const key in stored) if (!(key in body)) body[key] = stored[key];
  return body;
}
