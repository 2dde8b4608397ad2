import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createTestMcpServer } from './mcp-test-server.js';

// The test server over stdio: `node --import tsx test/support/mcp-test-server-stdio.ts`.
await createTestMcpServer('stdio').connect(new StdioServerTransport());
