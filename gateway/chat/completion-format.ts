import { randomUUID } from 'node:crypto';
import type { Usage } from '../../runtime/chat-types.js';
import type { ToolCallDelta } from '../../runtime/llm/llm-client.js';
import type { TurnOutcome } from '../../runtime/sessions/supervisor.js';

/**
 * A completion id: `chatcmpl-` and 8 hexadecimal characters, the first 8 of a random UUID
 * (all random; `randomUUID` draws from a pool where `randomBytes` asks the system each time).
 */
export function newCompletionId(): string {
  return `chatcmpl-${randomUUID().slice(0, 8)}`;
}

/** Unix time in seconds. */
export function unixNow(): number {
  return Math.floor(Date.now() / 1000);
}

/**
 * The non-streaming response body. The agent never refuses: `refusal` is always null, as
 * OpenAI's schema requires it present. The model's reasoning is `reasoning_content`, where
 * DeepSeek's API, Open WebUI and LibreChat read it.
 */
export function completionBody(id: string, model: string, created: number, outcome: TurnOutcome) {
  const message: Record<string, unknown> = { role: 'assistant', content: outcome.content, refusal: null };
  if (outcome.reasoning !== '') message.reasoning_content = outcome.reasoning;
  if (outcome.toolCalls.length > 0) {
    message.tool_calls = outcome.toolCalls;
    if (outcome.content === '') message.content = null;
  }
  return {
    id,
    object: 'chat.completion',
    created,
    model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: outcome.finishReason }],
    ...(outcome.usage ? { usage: usageBody(outcome.usage) } : {}),
  };
}

/** The usage in OpenAI's shape: the counts, and the reasoning tokens among the completion's when the server counted them. */
export function usageBody(usage: Usage) {
  const { prompt_tokens, completion_tokens, total_tokens, reasoning_tokens } = usage;
  return {
    prompt_tokens,
    completion_tokens,
    total_tokens,
    ...(reasoning_tokens === undefined ? {} : { completion_tokens_details: { reasoning_tokens } }),
  };
}

/** Builds the chunks of one streamed response; every chunk shares id, created and model. */
export class ChunkFormatter {
  private readonly prefix: string;

  constructor(id: string, model: string, created: number) {
    // The constant part of every chunk is serialised once.
    this.prefix = `{"id":${JSON.stringify(id)},"object":"chat.completion.chunk","created":${created},"model":${JSON.stringify(model)},"choices":`;
  }

  role(): string {
    return `${this.prefix}[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`;
  }

  content(piece: string): string {
    return `${this.prefix}[{"index":0,"delta":{"content":${JSON.stringify(piece)}},"logprobs":null,"finish_reason":null}]}`;
  }

  reasoning(piece: string): string {
    return `${this.prefix}[{"index":0,"delta":{"reasoning_content":${JSON.stringify(piece)}},"logprobs":null,"finish_reason":null}]}`;
  }

  toolCall(delta: ToolCallDelta): string {
    return `${this.prefix}[{"index":0,"delta":{"tool_calls":[${JSON.stringify(delta)}]},"logprobs":null,"finish_reason":null}]}`;
  }

  finish(finishReason: string): string {
    return `${this.prefix}[{"index":0,"delta":{},"logprobs":null,"finish_reason":${JSON.stringify(finishReason)}}]}`;
  }

  usage(usage: Usage): string {
    return `${this.prefix}[],"usage":${JSON.stringify(usageBody(usage))}}`;
  }
}
