import type { ChatMessage, ToolDefinition } from '../chat-types.js';
import { estimateMessageTokens, estimatePromptTokens, renderedText, REPLY_PRIMING_TOKENS, TOKENS_PER_MESSAGE } from './token-estimate.js';

/**
 * A call's messages fitted into the model's context window: how many older ones were left out,
 * how many of the history before the new message were kept (what a tighter fit could leave out),
 * and the most tokens the reply may have (`maxTokens`, lowered when the window leaves less).
 */
export type FittedContext = { messages: ChatMessage[]; dropped: number; history: number; maxTokens: number };

/** The least room for a reply a call is made with: below it, the conversation does not fit. */
export const MIN_REPLY_TOKENS = 16;

/** Why even the least a call needs does not fit: the figures, for the error the client gets. */
export class ContextOverflow extends Error {
  override readonly name = 'ContextOverflow';

  constructor(
    readonly window: number,
    readonly promptTokens: number,
    readonly maxTokens: number,
  ) {
    super(
      `This model's maximum context length is ${window} tokens. However, the least this request needs is about ${promptTokens} tokens of ` +
        `prompt (the system prompt, the tools and the new message), leaving less than ${Math.min(MIN_REPLY_TOKENS, maxTokens)} for the reply. Please shorten the message.`,
    );
  }
}

/**
 * Fits a call into a context window of `window` tokens, counted by `scale` times the
 * service's estimate. What a call always needs stays: every system message (the service's
 * prompt, memories, the client's own), the tool definitions, the new message with whatever
 * followed it in this turn (the model's tool calls and their results), and room for `maxTokens`
 * of reply. Then as many of the most recent earlier messages as fit, newest first, a tool
 * exchange (an assistant's calls with their results) whole or not at all; the history kept
 * starts at a user message, as templates expect. When the least a call needs leaves less than
 * `maxTokens` (a client asking for more than the window holds), the reply gets what is left,
 * without history; when that is under `MIN_REPLY_TOKENS`, throws `ContextOverflow`.
 */
export function fitContext(
  messages: readonly ChatMessage[],
  options: { window: number; maxTokens: number; tools?: readonly ToolDefinition[]; scale: number },
): FittedContext {
  const tokens = (count: number) => Math.ceil(count * options.scale);
  // Most calls are far from the window: no estimate counts more than a token a character, so
  // when the characters fit, the call does (without reading every character).
  const all = fitsByLength(messages, options) ? 0 : tokens(estimatePromptTokens(messages, options.tools));
  const lastUser = messages.map((message) => message.role).lastIndexOf('user');
  const pinnedFrom = lastUser >= 0 ? lastUser : messages.length - 1;
  if (all + options.maxTokens <= options.window) {
    const history = messages.filter((message, index) => message.role !== 'system' && index < pinnedFrom).length;
    return { messages: [...messages], dropped: 0, history, maxTokens: options.maxTokens };
  }
  const isPinned = (message: ChatMessage, index: number) => message.role === 'system' || index >= pinnedFrom;
  const pinned = messages.filter(isPinned);
  const least = tokens(estimatePromptTokens(pinned, options.tools));
  if (least + options.maxTokens > options.window) {
    const left = options.window - least;
    if (left < Math.min(MIN_REPLY_TOKENS, options.maxTokens)) throw new ContextOverflow(options.window, least, options.maxTokens);
    return { messages: pinned, dropped: messages.length - pinned.length, history: 0, maxTokens: left };
  }

  const units = historyUnits(messages.slice(0, pinnedFrom));
  let room = options.window - options.maxTokens - least;
  let kept = units.length;
  while (kept > 0) {
    const cost = tokens(units[kept - 1]!.reduce((sum, message) => sum + estimateMessageTokens(message), 0));
    if (cost > room) break;
    room -= cost;
    kept--;
  }
  // The history kept starts at a user message: a reply without its question reads as the model's own.
  while (kept < units.length && units[kept]![0]!.role !== 'user') kept++;
  const history = new Set(units.slice(kept).flat());
  const fitted = messages.filter((message, index) => isPinned(message, index) || history.has(message));
  const dropped = messages.length - fitted.length;
  return { messages: fitted, dropped, history: history.size, maxTokens: options.maxTokens };
}

/** Whether the call fits even at a token a character (more than the estimate ever counts). */
function fitsByLength(messages: readonly ChatMessage[], options: { window: number; maxTokens: number; tools?: readonly ToolDefinition[]; scale: number }): boolean {
  let chars = options.tools && options.tools.length > 0 ? JSON.stringify(options.tools).length : 0;
  for (const message of messages) chars += renderedText(message).length + TOKENS_PER_MESSAGE;
  return Math.ceil((chars + REPLY_PRIMING_TOKENS) * options.scale) + options.maxTokens <= options.window;
}

/**
 * The non-system messages of the history in the units they are dropped by: an assistant
 * message with tool calls together with the tool results after it, any other message alone.
 */
function historyUnits(history: readonly ChatMessage[]): ChatMessage[][] {
  const units: ChatMessage[][] = [];
  for (const message of history) {
    if (message.role === 'system') continue;
    const last = units.at(-1);
    if (message.role === 'tool' && last && (last[0]!.role === 'tool' || (last[0]!.role === 'assistant' && (last[0] as { tool_calls?: unknown[] }).tool_calls?.length))) {
      last.push(message);
    } else {
      units.push([message]);
    }
  }
  return units;
}
