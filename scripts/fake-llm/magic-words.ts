import type { FakeMessage } from './messages.js';
import { lastUserText } from './messages.js';
import { toolResultReply } from './default-reply.js';
import type { FakeToolCall, ReplyModifiers, ReplySpec } from './reply-spec.js';

const TOOL_WORD = /\[\[tool:([\w.-]+)(?:\s+(\{[\s\S]*?\}))?\s*\]\]/g;
const ERROR_WORD = /\[\[error:(\d{3})(?:\s+([^\]]*))?\]\]/;
const SLOW_WORD = /\[\[slow:(\d+)\]\]/;
const PACE_WORD = /\[\[pace:(\d+)\]\]/;
const CUT_WORD = /\[\[cut:(\d+)\]\]/;
const HANG_WORD = '[[hang]]';
const ECHO_CONTEXT_WORD = '[[echo-context]]';

/**
 * The reply the magic words in the last user message ask for, or undefined when it has none:
 * `[[tool:NAME {json}]]` (repeatable), `[[error:503]]`, `[[hang]]`, `[[echo-context]]`,
 * and the modifiers `[[slow:MS]]`, `[[pace:MS]]`, `[[cut:N]]`.
 */
export function parseMagicWords(messages: FakeMessage[]): ReplySpec | undefined {
  const text = lastUserText(messages);
  if (!text.includes('[[')) return undefined;
  const base = baseReply(text, messages);
  const modifiers = parseModifiers(text);
  if (base === undefined && Object.keys(modifiers).length === 0) return undefined;
  return { ...(base ?? {}), ...modifiers } as ReplySpec;
}

function baseReply(text: string, messages: FakeMessage[]): ReplySpec | undefined {
  const error = ERROR_WORD.exec(text);
  if (error) return { error: { status: Number(error[1]), message: error[2]?.trim() || `Fake LLM error ${error[1]}` } };
  if (text.includes(HANG_WORD)) return { hang: true };
  const toolCalls = parseToolCalls(text);
  if (toolCalls.length > 0) return toolResultReply(messages) ?? { toolCalls };
  if (text.includes(ECHO_CONTEXT_WORD)) return { content: describeContext(messages) };
  return undefined;
}

function parseToolCalls(text: string): FakeToolCall[] {
  return [...text.matchAll(TOOL_WORD)].map((match) => ({
    name: match[1] ?? '',
    arguments: match[2] === undefined ? {} : parseArguments(match[2]),
  }));
}

/** Arguments that are not valid JSON are sent as written, as a real model might. */
function parseArguments(raw: string): object | string {
  try {
    return JSON.parse(raw) as object;
  } catch {
    return raw;
  }
}

function parseModifiers(text: string): ReplyModifiers {
  const modifiers: ReplyModifiers = {};
  const slow = SLOW_WORD.exec(text);
  const pace = PACE_WORD.exec(text);
  const cut = CUT_WORD.exec(text);
  if (slow) modifiers.delayMs = Number(slow[1]);
  if (pace) modifiers.pieceDelayMs = Number(pace[1]);
  if (cut) modifiers.cutAfterPieces = Number(cut[1]);
  return modifiers;
}

/** The JSON of the roles and text contents received, tool calls included, so tests can check the context. */
export function describeContext(messages: FakeMessage[]): string {
  return JSON.stringify(messages.map(summariseMessage));
}

function summariseMessage(message: FakeMessage): Record<string, unknown> {
  const summary: Record<string, unknown> = { role: message.role, content: message.content ?? null };
  if (message.tool_calls !== undefined) summary.tool_calls = message.tool_calls;
  if (message.tool_call_id !== undefined) summary.tool_call_id = message.tool_call_id;
  return summary;
}
