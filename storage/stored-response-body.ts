import { toJsonText } from '../runtime/json-text.js';

/**
 * The fields of a response object in the order `responseBody` (gateway/responses-format.ts)
 * makes them, which is OpenAI's schema's, each with the value it holds unless its request or
 * its turn set it: a stored body leaves those out, and reading it fills them in again. The
 * fields without one (undefined) are always stored, but for the id and the status, which the
 * row keeps in columns of their own.
 */
const FIELDS: Readonly<Record<string, unknown>> = {
  id: undefined,
  object: 'response',
  created_at: undefined,
  status: undefined,
  background: false,
  error: null,
  incomplete_details: null,
  instructions: null,
  max_output_tokens: null,
  metadata: {},
  model: undefined,
  output: undefined,
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
  usage: undefined,
  user: undefined,
};

/** The defaults as JSON text (the fields without one drop out): SQL that builds a whole body from a stored one (`defaults || body`) is given it. */
export const RESPONSE_BODY_DEFAULTS_JSON = JSON.stringify(FIELDS);

/** Each default's JSON text, which an object value is compared with. */
const DEFAULT_TEXTS = new Map(Object.entries(FIELDS).flatMap(([key, value]) => (value === undefined ? [] : [[key, JSON.stringify(value)] as const])));

/** The fields of a response object that its row keeps in columns of their own. */
const COLUMN_FIELDS = new Set(['id', 'status']);

/**
 * A response object as the `body` column keeps it: JSON text without its id and status (the
 * row's columns) and without the fields that hold their defaults, some 450 of a body's 1,450
 * bytes in a turn that sets none of them. A response row is written with every Responses API
 * turn, and its bytes are most of what such a turn adds to the database's work over a chat turn.
 */
export function storedResponseBody(body: Readonly<Record<string, unknown>>): string {
  const stored: Record<string, unknown> = {};
  for (const key in body) {
    if (COLUMN_FIELDS.has(key)) continue;
    const value = body[key];
    const fallback = DEFAULT_TEXTS.get(key);
    if (fallback !== undefined && (value === FIELDS[key] || (typeof value === 'object' && value !== null && JSON.stringify(value) === fallback))) continue;
    stored[key] = value;
  }
  return toJsonText(stored);
}

/**
 * The response object of a stored body: its id and status (the row's columns), the defaults
 * it left out, and its own fields, in the schema's order. A body stored whole (before bodies
 * were stored without their defaults) reads back as it was.
 */
export function responseBodyOf(id: string, status: string, stored: Readonly<Record<string, unknown>>): Record<string, unknown> & { status: string } {
  const defaults = JSON.parse(RESPONSE_BODY_DEFAULTS_JSON) as Record<string, unknown>;
  const body: Record<string, unknown> = {};
  for (const key in FIELDS) {
    const value = key === 'id' ? id : key === 'status' ? status : key in stored ? stored[key] : defaults[key];
    if (value !== undefined) body[key] = value;
  }
  for (const key in stored) if (!(key in body)) body[key] = stored[key];
  return body as Record<string, unknown> & { status: string };
}
