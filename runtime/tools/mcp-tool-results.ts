import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { mcpClientSdk } from './mcp-client-sdk.js';

/** Parsed `function.arguments`, or why they cannot be used. */
export type ParsedArguments = { ok: true; value: Record<string, unknown> } | { ok: false; message: string };

/** Parses the JSON arguments the LLM wrote; an empty string means no arguments. */
export function parseToolArguments(text: string | undefined): ParsedArguments {
  if (text === undefined || text.trim() === '') return { ok: true, value: {} };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { ok: false, message: `the arguments are not valid JSON (${(error as Error).message})` };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false, message: 'the arguments must be a JSON object' };
  }
  return { ok: true, value: value as Record<string, unknown> };
}

/** The text the LLM sees for an MCP tool result: text parts joined, other parts summarised. */
export function formatToolContent(result: CallToolResult): string {
  const parts = result.content.map((part) => {
    switch (part.type) {
      case 'text':
        return part.text;
      case 'image':
        return `[image: ${part.mimeType}]`;
      case 'audio':
        return `[audio: ${part.mimeType}]`;
      case 'resource_link':
        return `[resource link: ${part.name} ${part.uri}]`;
      case 'resource':
        return 'text' in part.resource ? part.resource.text : `[resource: ${part.resource.uri}${part.resource.mimeType ? ` (${part.resource.mimeType})` : ''}]`;
      default:
        return `[${(part as { type: string }).type}]`;
    }
  });
  if (parts.length > 0) return parts.join('\n');
  if (result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  return '(the tool returned no content)';
}

/** What went wrong with a call that produced no tool result, and whether the server must be restarted. */
export type CallFailure = { message: string; restart: boolean };

/** Turns what `callTool` rejected with into a message for the LLM and a restart decision. */
export function describeCallFailure(
  error: unknown,
  context: { server: string; tool: string; timeoutMs: number; cancelled: boolean; exitReason?: string },
): CallFailure {
  const { server, tool } = context;
  if (context.cancelled) return { message: `the call to ${tool} was cancelled`, restart: false };
  // An McpError comes from a connection, which loaded the SDK.
  const sdk = mcpClientSdk.loaded;
  if (sdk && error instanceof sdk.McpError) {
    if (error.code === sdk.ErrorCode.RequestTimeout) {
      return { message: `tool ${tool} on server ${server} did not answer within ${context.timeoutMs} ms`, restart: true };
    }
    if (error.code === sdk.ErrorCode.ConnectionClosed) {
      const why = context.exitReason ? `: ${context.exitReason}` : '';
      return { message: `server ${server} closed the connection during the call to ${tool}${why}`, restart: true };
    }
    // An error the server answered with: the server itself is fine.
    return { message: `tool ${tool} on server ${server} failed: ${stripMcpPrefix(error.message)}`, restart: false };
  }
  if (isSchemaError(error)) {
    return { message: `server ${server} returned a malformed result for ${tool} (${summariseIssues(error.issues)})`, restart: true };
  }
  return { message: `tool ${tool} on server ${server} failed: ${errorText(error)}`, restart: true };
}

/** An error's message, with its cause's (`fetch failed (connect ECONNREFUSED …)`). */
export function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? error.cause.message : undefined;
  return cause && !error.message.includes(cause) ? `${error.message} (${cause})` : error.message;
}

function isSchemaError(error: unknown): error is { issues: Array<{ path: PropertyKey[]; message: string }> } {
  // zod 3 calls it ZodError, zod 4 $ZodError.
  return error instanceof Error && /ZodError$/.test(error.name) && Array.isArray((error as { issues?: unknown }).issues);
}

function summariseIssues(issues: Array<{ path: PropertyKey[]; message: string }>): string {
  return issues
    .slice(0, 3)
    .map((issue) => `${issue.path.length ? issue.path.map(String).join('.') : 'result'}: ${issue.message}`)
    .join('; ');
}

function stripMcpPrefix(message: string): string {
  return message.replace(/^MCP error -?\d+: /, '');
}
