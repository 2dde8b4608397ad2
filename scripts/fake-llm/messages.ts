/** A chat message as the fake LLM reads it: only the fields it looks at are typed. */
export type FakeMessage = {
  role: string;
  content?: unknown;
  name?: string;
  tool_calls?: unknown;
  tool_call_id?: string;
};

/** A `POST /v1/chat/completions` body as the fake LLM reads it. */
export type ChatRequestBody = {
  model?: string;
  messages: FakeMessage[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean } | null;
  tools?: unknown[];
  [key: string]: unknown;
};

/** The text of a message content: the string itself, or the text parts of a content array joined. */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map(partText).join('');
}

function partText(part: unknown): string {
  if (typeof part === 'string') return part;
  const text = (part as { text?: unknown } | null)?.text;
  return typeof text === 'string' ? text : '';
}

/** The index of the last user message, or -1 when there is none. */
export function lastUserIndex(messages: FakeMessage[]): number {
  for (let i = messages.length - 1; i >= 0; i -= 1) {
    if (messages[i]?.role === 'user') return i;
  }
  return -1;
}

/** The text of the last user message, or '' when there is none. */
export function lastUserText(messages: FakeMessage[]): string {
  return textOf(messages[lastUserIndex(messages)]?.content);
}

/**
 * The tool messages after the last user message: results of the calls the model asked for this
 * turn. The results of hand-offs (`transfer_to_` calls) are not among them.
 */
export function toolResultsAfterLastUser(messages: FakeMessage[]): FakeMessage[] {
  const transfers = transferCallIds(messages);
  return messages
    .slice(lastUserIndex(messages) + 1)
    .filter((message) => message.role === 'tool' && !(message.tool_call_id !== undefined && transfers.has(message.tool_call_id)));
}

/** A rough token count: the number of whitespace-separated words. */
export function countWords(text: string): number {
  return text.match(/\S+/g)?.length ?? 0;
}

/** Splits text into word pieces (each with its surrounding spaces) that join back to exactly the text. */
export function splitWords(text: string): string[] {
  return text.match(/\s*\S+\s*|\s+/g) ?? [];
}

/** Splits text into pieces of at most `size` characters that join back to exactly the text. */
export function splitEvery(text: string, size: number): string[] {
  const pieces: string[] = [];
  for (let start = 0; start < text.length; start += size) pieces.push(text.slice(start, start + size));
  return pieces;
}

/** The prefix of the hand-off tools an agent service offers (`transfer_to_<state>`). */
export const TRANSFER_PREFIX = 'transfer_to_';

/**
 * The ids of the `transfer_to_` calls made after the last user message: their results name the
 * state that now answers, they are not tool results to report.
 */
export function transferCallIds(messages: FakeMessage[]): Set<string> {
  const ids = new Set<string>();
  for (const message of messages.slice(lastUserIndex(messages) + 1)) {
    if (message.role !== 'assistant' || !Array.isArray(message.tool_calls)) continue;
    for (const call of message.tool_calls as Array<{ id?: unknown; function?: { name?: unknown } }>) {
      const name = call.function?.name;
      if (typeof call.id === 'string' && typeof name === 'string' && name.startsWith(TRANSFER_PREFIX)) ids.add(call.id);
    }
  }
  return ids;
}

