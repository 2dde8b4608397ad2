import type { ToolCall, ToolDefinition } from '../chat-types.js';

/**
 * The result of one tool call, as the LLM will see it; `source` is the server and its own
 * name of the tool that ran (absent when no tool has the called name).
 */
export type ToolCallResult = { toolCallId: string; name: string; content: string; isError: boolean; source?: ToolSource };

/** Where a tool lives: its server's name and the tool's name on that server. */
export type ToolSource = { server: string; tool: string };

/** Who a tool call runs for, how it is cancelled, and (tracing on) the `traceparent` of its span, sent on to the tool server. */
export type ToolCallScope = { userId: string; sessionId: string; signal: AbortSignal; traceparent?: string };

/** The tools the agent can call. */
export interface ToolRunner {
  /**
   * Resolves once every tool server's first connection attempt has ended (at once from then
   * on), so that the tools offered are known; never rejects (a server whose attempt failed is
   * retried in the background).
   */
  ready(): Promise<void>;
  /** The tools offered to the LLM; `allowed` narrows them to a state's list. */
  definitions(allowed?: string[]): ToolDefinition[];
  /** Text appended to the base system prompt: each tool's name, description and input schema; `allowed` narrows them as `definitions` does. */
  describe(allowed?: string[]): string;
  /**
   * Runs one call. Failures (unknown tool, bad arguments, a tool error, a crash, a time-out,
   * cancellation) are results with `isError`, never exceptions, with one exception: a tool
   * of a per-user server when the user has not connected their account throws a
   * `ServiceError('TOOL_AUTH_REQUIRED')` whose `details` hold `server`, `tool` and
   * `login_url`, for the frontend to send the user there.
   */
  call(toolCall: ToolCall, scope: ToolCallScope): Promise<ToolCallResult>;
  /**
   * Where the tool offered as `name` lives when its calls wait for the user's approval: by its
   * server's `require_approval`, or because `required` (the graph's tool state asks for it);
   * undefined when its calls run at once, or no tool has the name.
   */
  approvalFor(name: string, required?: boolean): ToolSource | undefined;
  /**
   * Whether a call of the tool offered as `name` may run again with the same arguments to no
   * further effect: the tool says so (MCP annotations `readOnlyHint` or `idempotentHint`), or
   * its server is configured `idempotent`. False for a name no tool has.
   */
  isRepeatable(name: string): boolean;
}

/** The health of one tool server, as `/health` reports it. */
export type ToolServerStatus = {
  /** `per_user`: a per-user server whose tool list is known; each user gets their own connection. */
  status: 'connected' | 'connecting' | 'failed' | 'per_user';
  transport: 'stdio' | 'http';
  /** How many tools it offers (the last known list while it is down). */
  tools: number;
  /** The last failure, while the server is failed or reconnecting. */
  error?: string;
  /** Connection attempts so far. */
  attempts: number;
  /** When the last attempt started, ISO 8601. */
  lastAttempt?: string;
  /** Per-user servers: how many users have a live connection. */
  users?: number;
};

/** A tool runner with a lifecycle: the composition root starts it, reports it on /health and closes it. */
export interface ManagedToolRunner extends ToolRunner {
  /** Connects to the tool servers and lists their tools; resolves once each first attempt ended, never rejects (failed servers are retried). */
  start(): Promise<void>;
  /** Each server's health, by server name. */
  status(): Record<string, ToolServerStatus>;
  /** Closes every connection and ends every server process. */
  close(): Promise<void>;
}

/** A runner with no tools: every call is an error result naming the unknown tool. */
export const NO_TOOLS: ManagedToolRunner = {
  start: async () => {},
  ready: async () => {},
  status: () => ({}),
  close: async () => {},
  definitions: () => [],
  describe: () => '',
  approvalFor: () => undefined,
  isRepeatable: () => false,
  call: async (toolCall) => ({
    toolCallId: toolCall.id,
    name: toolCall.function.name,
    content: `Error: no tool named "${toolCall.function.name}" is available`,
    isError: true,
  }),
};
