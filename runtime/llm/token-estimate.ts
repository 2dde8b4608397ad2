import type { ChatMessage, ToolDefinition } from '../chat-types.js';

/** The tokens a chat template adds around each message (role markers, separators). */
export const TOKENS_PER_MESSAGE = 4;

/** The tokens a template adds to open the reply. */
export const REPLY_PRIMING_TOKENS = 3;

/**
 * Roughly how many tokens `text` is, erring high: an English word of 4 to 5 characters is
 * about one token in the tokenizers of Llama, Qwen, Mistral and Gemma, so ASCII counts a token
 * per 3.5 characters; other alphabets (Cyrillic, Greek, accented Latin) about two characters a
 * token; CJK and other scripts about a token a character. The service's figures from the
 * server's own counts correct it (see `LlmServerProfile.tokenScale`).
 */
export function estimateTextTokens(text: string): number {
  let ascii = 0;
  let narrow = 0;
  let wide = 0;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code < 0x80) ascii++;
    else if (code < 0x800) narrow++;
    else if (code < 0xd800 || code > 0xdbff) wide++; // a surrogate pair counts once, at its low half
  }
  return Math.ceil(ascii / 3.5 + narrow / 2 + wide);
}

/** The text of a message as a template renders it: its content, and its tool calls' names and arguments. */
export function renderedText(message: ChatMessage): string {
  const content = (message as { content?: unknown }).content;
  let text = '';
  if (typeof content === 'string') text = content;
  else if (Array.isArray(content)) {
    for (const part of content as Array<{ type?: string; text?: unknown }>) if (typeof part.text === 'string') text += part.text;
  }
  if (message.role === 'assistant') {
    for (const call of message.tool_calls ?? []) if (call.type === 'function') text += `${call.function.name}${call.function.arguments}`;
  }
  return text;
}

/** Roughly how many tokens one message takes in a prompt. */
export function estimateMessageTokens(message: ChatMessage): number {
  return estimateTextTokens(renderedText(message)) + TOKENS_PER_MESSAGE;
}

/** Roughly how many tokens the tools' definitions take (templates render them as JSON in the prompt). */
export function estimateToolTokens(tools: readonly ToolDefinition[] | undefined): number {
  return tools && tools.length > 0 ? estimateTextTokens(JSON.stringify(tools)) : 0;
}

/** Roughly how many tokens a whole prompt takes: its messages, its tools and the reply's opening. */
export function estimatePromptTokens(messages: readonly ChatMessage[], tools?: readonly ToolDefinition[]): number {
  let tokens = REPLY_PRIMING_TOKENS + estimateToolTokens(tools);
  for (const message of messages) tokens += estimateMessageTokens(message);
  return tokens;
}
