import type { ConversationRecord, SessionRecord } from '../../runtime/ports.js';
import { APPROVAL_ROLE, storedToolCall } from '../../runtime/sessions/conversation-history.js';
import { FAILED_REPLY_ROLE, PRIVATE_STEP_ROLE, REASONING_ROLE } from '../../runtime/sessions/supervisor.js';
import { functionCallItem, outputTextPart } from '../responses/responses-format.js';

/** The prefix of an item's id by the item's type; the rest of the id is its record's id. */
const ID_PREFIX = { message: 'msg', function_call: 'fc', function_call_output: 'fco', mcp_approval_response: 'mcpa', reasoning: 'rs' } as const;

/** An item id as `itemId` makes them. */
const ITEM_ID = /^(?:msg|fc|fco|mcpa|rs)_(\d{1,16})$/;

/** Roles of the records shown as the assistant's messages: its replies, failed ones included. */
const ASSISTANT_ROLES = new Set(['assistant', FAILED_REPLY_ROLE]);

/** Roles of the records shown as input messages with their own role. */
const INPUT_ROLES = new Set(['user', 'system', 'developer']);

/** The conversation object of OpenAI's Conversations API for a session. */
export function conversationObject(session: SessionRecord) {
  return { id: session.sessionId, object: 'conversation', created_at: Math.floor(session.createdAt.getTime() / 1000), metadata: session.metadata };
}

/** The id of the record an item id names, or undefined when it is not an item id. */
export function recordIdOf(itemId: string): number | undefined {
  const match = ITEM_ID.exec(itemId);
  const id = match ? Number(match[1]) : NaN;
  return Number.isSafeInteger(id) ? id : undefined;
}

/**
 * A stored conversation record as a conversation item: user, system and developer records
 * are input messages; the assistant's replies (failed ones too) output messages; a `tool_call`
 * record (`{id, name, arguments}`) a `function_call`; a `tool` record (`{tool_call_id,
 * content}`) a `function_call_output`; an `approval` record (`{approval_request_id, approve,
 * reason?}`) an `mcp_approval_response`; the model's reasoning, and a private step's text (an
 * agent state's that handed over to another, kept out of the reply), a `reasoning` item with that text. A record of any
 * other role is a message of role `unknown`.
 */
export function conversationItem(record: ConversationRecord): Record<string, unknown> {
  if (record.role === 'tool_call') {
    const call = storedToolCall(record.message);
    const fields = { id: call?.id ?? '', name: call?.function.name ?? '', arguments: call?.function.arguments ?? '' };
    return functionCallItem(itemId('function_call', record), fields, 'completed');
  }
  if (record.role === 'tool') {
    const result = jsonFields(record.message);
    const output = typeof result.content === 'string' ? result.content : record.message;
    return { id: itemId('function_call_output', record), type: 'function_call_output', status: 'completed', call_id: textField(result, 'tool_call_id'), output };
  }
  if (record.role === APPROVAL_ROLE) {
    const answer = jsonFields(record.message);
    const reason = answer.reason;
    return {
      id: itemId('mcp_approval_response', record),
      type: 'mcp_approval_response',
      approval_request_id: textField(answer, 'approval_request_id'),
      approve: answer.approve === true,
      reason: typeof reason === 'string' ? reason : null,
    };
  }
  if (record.role === PRIVATE_STEP_ROLE || record.role === REASONING_ROLE) {
    return { id: itemId('reasoning', record), type: 'reasoning', status: 'completed', summary: [], content: [{ type: 'reasoning_text', text: record.message }] };
  }
  if (ASSISTANT_ROLES.has(record.role)) {
    return { id: itemId('message', record), type: 'message', status: 'completed', role: 'assistant', content: [outputTextPart(record.message)] };
  }
  const role = INPUT_ROLES.has(record.role) ? record.role : 'unknown';
  return { id: itemId('message', record), type: 'message', status: 'completed', role, content: [{ type: 'input_text', text: record.message }] };
}

function itemId(type: keyof typeof ID_PREFIX, record: ConversationRecord): string {
  return `${ID_PREFIX[type]}_${record.id}`;
}

/** The fields of a record's JSON object, or none when it holds no JSON object. */
function jsonFields(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function textField(fields: Record<string, unknown>, name: string): string {
  const value = fields[name];
  return typeof value === 'string' ? value : '';
}
