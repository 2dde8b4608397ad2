import type { ResponseBody } from '../runtime/ports.js';

/**
 * The fields of a response object in the order `responseBody` (gateway/responses/responses-format.ts)
 * makes them, which is OpenAI's schema's, each with the value it holds unless its request or
 * its turn set it. A body is stored whole, as the client was sent it; bodies stored by the
 * builds before migration 0015 left out their id and the fields at these values, and reading
 * one fills them in again. The fields without a value (undefined) were always stored.
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

/**
 * The response object of a stored body: its id and status (the row's columns), the defaults
 * a body stored without them left out, and its own fields, in the schema's order.
 */
export function responseBodyOf(id: string, status: string, stored: Readonly<Record<string, unknown>>): ResponseBody {
  const defaults = JSON.parse(RESPONSE_BODY_DEFAULTS_JSON) as Record<string, unknown>;
  const body: Record<string, unknown> = {};
  for (const key in FIELDS) {
    const value = key === 'id' ? id : key === 'status' ? status : key in stored ? stored[key] : defaults[key];
    if (value !== undefined) body[key] = value;
  }
  for (const key in stored) if (!(key in body)) body[key] = stored[key];
  return body as ResponseBody;
}
