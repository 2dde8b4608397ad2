import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ElicitRequestSchema, type CallToolResult, type ElicitRequest, type ElicitResult } from '@modelcontextprotocol/sdk/types.js';

/** The MCP SDK's client connected to the service's `/mcp`, and its transport (which holds the MCP session id). */
export type McpConnection = { client: Client; transport: StreamableHTTPClientTransport };

/** How a test client connects. */
export type McpConnectOptions = {
  /** An MCP session to continue, instead of starting one. */
  sessionId?: string;
  /** Headers sent with every request (an API key, X-User-ID). */
  headers?: Record<string, string>;
  fetch?: FetchLike;
  /** Declares form elicitation, and answers each form with this. */
  elicit?: (request: ElicitRequest) => ElicitResult;
  /** The client's name in its `initialize`. */
  name?: string;
};

/** Connects the MCP SDK's client to the service at `serviceUrl` (its base URL, without `/mcp`). */
export async function connectMcp(serviceUrl: string, options: McpConnectOptions = {}): Promise<McpConnection> {
  const transport = new StreamableHTTPClientTransport(new URL(`${serviceUrl}/mcp`), {
    ...(options.sessionId ? { sessionId: options.sessionId } : {}),
    ...(options.headers ? { requestInit: { headers: options.headers } } : {}),
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
  const client = new Client({ name: options.name ?? 'mcp-test', version: '1.0.0' }, options.elicit ? { capabilities: { elicitation: {} } } : {});
  const { elicit } = options;
  if (elicit) client.setRequestHandler(ElicitRequestSchema, (request) => elicit(request));
  await client.connect(transport);
  return { client, transport };
}

/** The text of a tool result. */
export function toolText(result: unknown): string {
  return (result as CallToolResult).content.map((part) => (part.type === 'text' ? part.text : '')).join('');
}
