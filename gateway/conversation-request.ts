import type { Request } from 'express';
import { z } from 'zod';
import type { SessionMetadata } from '../runtime/ports.js';
import { ServiceError } from '../runtime/service-error.js';
import { parseRequestBody, pathOfTextMatching } from './chat-request.js';
import { recordIdOf } from './conversation-format.js';

/** Most items a conversation may be created with, as OpenAI allows. */
const MAX_ITEMS = 20;
/** Most metadata keys, and their keys' and values' longest lengths, as OpenAI allows. */
const MAX_METADATA_KEYS = 16;
const MAX_KEY_LENGTH = 64;
const MAX_VALUE_LENGTH = 512;
/** Most items listed in one page, and the default. */
const MAX_PAGE = 100;
const DEFAULT_PAGE = 20;

const Metadata = z
  .record(z.string().max(MAX_KEY_LENGTH), z.string().max(MAX_VALUE_LENGTH, `values must be at most ${MAX_VALUE_LENGTH} characters`), {
    error: (issue) => (issue.code === 'invalid_key' ? `keys must be at most ${MAX_KEY_LENGTH} characters` : undefined),
  })
  .refine((metadata) => Object.keys(metadata).length <= MAX_METADATA_KEYS, `at most ${MAX_METADATA_KEYS} keys are accepted`);

const TextPart = z.looseObject({ type: z.enum(['input_text', 'output_text']), text: z.string() });

const MessageItem = z.looseObject({
  type: z.literal('message', { error: "only 'message' items can start a conversation" }).optional(),
  role: z.enum(['user', 'assistant', 'system', 'developer']),
  // A string is read as one text part, so that a bad part is named by its own path.
  content: z.preprocess(
    (content) => (typeof content === 'string' ? [{ type: 'input_text', text: content }] : content),
    z.array(TextPart, { error: 'must be a string or a list of input_text or output_text parts' }),
  ),
});

const CreateBody = z.object({
  items: z.array(MessageItem).max(MAX_ITEMS, `at most ${MAX_ITEMS} items are accepted`).nullish(),
  metadata: Metadata.nullish(),
});

const UpdateBody = z.object({ metadata: Metadata.nullable() });

/** A message item a conversation is created with, its content as text parts. */
export type StartingItem = z.infer<typeof MessageItem>;

/** A validated `POST /v1/conversations` body. */
export type ConversationCreation = { items: StartingItem[]; metadata: SessionMetadata };

/** What `GET /v1/conversations/{id}/items` asks for: `afterId` is the record of the `after` item. */
export type ItemsQuery = { limit: number; order: 'asc' | 'desc'; afterId?: number };

/** Validates a `POST /v1/conversations` body; a bad field is a 400 whose `param` names it (e.g. `items[2].type`). */
export function parseConversationCreation(body: unknown): ConversationCreation {
  // No body at all creates an empty conversation, as OpenAI's does.
  const parsed = parseRequestBody(CreateBody, body ?? {});
  refuseNul(body);
  return { items: parsed.items ?? [], metadata: parsed.metadata ?? {} };
}

/** Validates a `POST /v1/conversations/{id}` body: the metadata that replaces the conversation's (null clears it). */
export function parseConversationUpdate(body: unknown): SessionMetadata {
  const parsed = parseRequestBody(UpdateBody, body);
  refuseNul(body);
  return parsed.metadata ?? {};
}

/** Reads `limit` (1–100, default 20), `order` (default desc) and `after` (an item id); `include` is ignored. */
export function parseItemsQuery(req: Request): ItemsQuery {
  const limitText = singleQuery(req, 'limit') ?? String(DEFAULT_PAGE);
  const limit = /^\d+$/.test(limitText) ? Number(limitText) : NaN;
  if (!(limit >= 1 && limit <= MAX_PAGE)) throw new ServiceError('INVALID_REQUEST', `limit must be an integer from 1 to ${MAX_PAGE}`, { param: 'limit' });
  const order = singleQuery(req, 'order') ?? 'desc';
  if (order !== 'asc' && order !== 'desc') throw new ServiceError('INVALID_REQUEST', "order must be 'asc' or 'desc'", { param: 'order' });
  const after = singleQuery(req, 'after');
  if (after === undefined) return { limit, order };
  const afterId = recordIdOf(after);
  if (afterId === undefined) throw new ServiceError('INVALID_REQUEST', `after must be the id of a conversation item (such as msg_12), not '${after}'`, { param: 'after' });
  return { limit, order, afterId };
}

/** PostgreSQL text and jsonb hold no NUL: a body with one is refused, naming where it is. */
function refuseNul(body: unknown): void {
  const withNul = pathOfTextMatching(body, /\u0000/);
  if (withNul !== null) {
    throw new ServiceError('INVALID_REQUEST', `Invalid value for '${withNul}': text must not contain NUL characters`, { param: withNul });
  }
}

function singleQuery(req: Request, name: string): string | undefined {
  const value = req.query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new ServiceError('INVALID_REQUEST', `${name} must be given once, as a string`, { param: name });
  return value;
}
