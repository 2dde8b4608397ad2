import type { ChatMessage, ToolCall, ToolDefinition, Usage } from '../chat-types.js';
import { estimateTextTokens, renderedText, TOKENS_PER_MESSAGE } from './token-estimate.js';

/** Counts the tokens of a text: the server's tokenizer where it has one, else undefined. */
export type TokenCounter = (text: string) => Promise<number | undefined>;

/**
 * The usage of a call whose server reported none (llama.cpp and Ollama stream none unless
 * asked; some builds none at all): the prompt's texts and the reply counted by the server's
 * tokenizer, else by the service's estimate, and marked `estimated` either way (the template's
 * own tokens are only estimated).
 */
export async function countUsage(
  prompt: { messages: readonly ChatMessage[]; tools?: readonly ToolDefinition[] },
  reply: { content: string; reasoning: string; toolCalls: readonly ToolCall[] },
  counter: TokenCounter,
): Promise<Usage> {
  const promptText = [...prompt.messages.map(renderedText), ...(prompt.tools?.length ? [JSON.stringify(prompt.tools)] : [])].join('\n');
  const replyText = [reply.reasoning, reply.content, ...reply.toolCalls.map((call) => `${call.function.name}${call.function.arguments}`)].join('');
  const count = async (text: string) => (text === '' ? 0 : ((await counter(text)) ?? estimateTextTokens(text)));
  const [promptTokens, completionTokens] = await Promise.all([count(promptText), count(replyText)]);
  const prompt_tokens = promptTokens + TOKENS_PER_MESSAGE * prompt.messages.length;
  return { prompt_tokens, completion_tokens: completionTokens, total_tokens: prompt_tokens + completionTokens, estimated: true };
}
