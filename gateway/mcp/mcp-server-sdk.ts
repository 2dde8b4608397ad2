import { lazyModule } from '../../runtime/lazy-module.js';

/** What `/mcp` uses of the MCP SDK (its server, its transport, the protocol's schemas), loaded at the first request there. */
export const mcpServerSdk = lazyModule(async () => {
  const [server, streamableHttp, ajv, types] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/index.js'),
    import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/validation/ajv'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]);
  return { ...types, Server: server.Server, StreamableHTTPServerTransport: streamableHttp.StreamableHTTPServerTransport, AjvJsonSchemaValidator: ajv.AjvJsonSchemaValidator };
});

/** The MCP SDK's server side, loaded. */
export type McpServerSdk = Awaited<ReturnType<typeof mcpServerSdk.load>>;
