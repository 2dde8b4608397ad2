import { lazyModule } from '../lazy-module.js';

/** What the MCP tool clients use of the MCP SDK, loaded when the first tool server is connected. */
export const mcpClientSdk = lazyModule(async () => {
  const [client, streamableHttp, stdio, sharedStdio, types] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/client/stdio.js'),
    import('@modelcontextprotocol/sdk/shared/stdio.js'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]);
  return {
    Client: client.Client,
    StreamableHTTPClientTransport: streamableHttp.StreamableHTTPClientTransport,
    getDefaultEnvironment: stdio.getDefaultEnvironment,
    ReadBuffer: sharedStdio.ReadBuffer,
    serializeMessage: sharedStdio.serializeMessage,
    McpError: types.McpError,
    ErrorCode: types.ErrorCode,
  };
});

/** The MCP SDK's client side, loaded. */
export type McpClientSdk = Awaited<ReturnType<typeof mcpClientSdk.load>>;
