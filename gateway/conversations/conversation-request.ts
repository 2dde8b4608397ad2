import type { Request } from 'express';
import { z } from 'zod';
import type { ChatMessage } from '../../runtime/chat-types.js';
import type { SessionMetadata } from '../../runtime/ports.js';
import { toTurn, type Turn } from '../../runtime/sessions/conversation-history.js';
import { ServiceError } from '../../runtime/service-error.js';
import { recordIdOf } from './conversation-format.js';
import { listLimit, listOrder, singleQuery } from '../http/list-query.js';
import { Metadata } from '../http/metadata.js';
import { parseRequestBody } from '../http/request-body.js';

/** Most items a conversation may be created with, as OpenAI allows. */
const MAX_ITEMS = 20;

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

/** The turns a conversation's starting items are stored and hashed as: each item's text parts joined. */
export function startingTurns(items: readonly StartingItem[]): Turn[] {
  return items.map((item) => toTurn({ role: item.role, content: item.content.map((part) => part.text).join('') } as ChatMessage));
}

/** A validated `POST /v1/conversations` body. */
export type ConversationCreation = { items: StartingItem[]; metadata: SessionMetadata };

/** What `GET /v1/conversations/{id}/items` asks for: `afterId` is the record of the `after` item. */
export type ItemsQuery = { limit: number; order: 'asc' | 'desc'; afterId?: number };

/** Validates a `POST /v1/conversations` body; a bad field is a 400 whose `param` names it (e.g. `items[2].type`). */
export function parseConversationCreation(body: unknown): ConversationCreation {
  // No body at all creates an empty conversation, as OpenAI's does.
  const parsed = parseRequestBody(CreateBody, body ?? {});
  return { items: parsed.items ?? [], metadata: parsed.metadata ?? {} };
}

/** Validates a `POST /v1/conversations/{id}` body: the metadata that replaces the conversation's (null clears it). */
export function parseConversationUpdate(body: unknown): SessionMetadata {
  const parsed = parseRequestBody(UpdateBody, body);
  return parsed.metadata ?? {};
}

/** Reads `limit` (1–100, default 20), `order` (default desc) and `after` (an item id); `include` is ignored. */
export function parseItemsQuery(req: Request): ItemsQuery {
  const limit = listLimit(req);
  const order = listOrder(req);
  const after = singleQuery(req, 'after');
  if (after === undefined) return { limit, order };
  const afterId = recordIdOf(after);
  if (afterId === undefined) throw new ServiceError('INVALID_REQUEST', `after must be the id of a conversation item (such as msg_12), not '${after}'`, { param: 'after' });
  return { limit, order, afterId };
}
