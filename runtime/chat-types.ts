import type {
  ChatCompletionMessageParam,
  ChatCompletionMessageToolCall,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';

/** A message of the OpenAI chat format, as clients send it and the LLM receives it. */
export type ChatMessage = ChatCompletionMessageParam;

/** A function tool call as the LLM returns it. */
export type ToolCall = Extract<ChatCompletionMessageToolCall, { type: 'function' }>;

/** A tool offered to the LLM in the OpenAI `tools` field. */
export type ToolDefinition = ChatCompletionTool;

/**
 * Token counts of an LLM call: the server's, or counted by the service when the server sent
 * none (`estimated`); `reasoning_tokens`, of the completion's, when the server counts them.
 */
export type Usage = { prompt_tokens: number; completion_tokens: number; total_tokens: number; reasoning_tokens?: number; estimated?: boolean };

/** The parameters of one LLM call. */
export type GenerationParams = { model: string; temperature: number; max_tokens: number };
