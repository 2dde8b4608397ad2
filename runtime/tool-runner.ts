import type { ToolCall, ToolDefinition } from './chat-types.js';

/** The result of one tool call, as the LLM will see it. */
export type ToolCallResult = { toolCallId: string; name: string; content: string; isError: boolean };

/** Who a tool call runs for, and how it is cancelled. */
export type ToolCallScope = { userId: string; sessionId: string; signal: AbortSignal };

/** The tools the agent can call. */
export interface ToolRunner {
  /** The tools offered to the LLM; `allowed` narrows them to a state's list. */
  definitions(allowed?: string[]): ToolDefinition[];
  /** Text appended to the base system prompt: each tool's name, description and input schema. */
  describe(): string;
  /** Runs one call. Failures are results with `isError`, never exceptions. */
  call(toolCall: ToolCall, scope: ToolCallScope): Promise<ToolCallResult>;
}

/** A runner with no tools: every call is an error result naming the unknown tool. */
export const NO_TOOLS: ToolRunner = {
  definitions: () => [],
  describe: () => '',
  call: async (toolCall) => ({
    toolCallId: toolCall.id,
    name: toolCall.function.name,
    content: `Error: no tool named "${toolCall.function.name}" is available`,
    isError: true,
  }),
};
