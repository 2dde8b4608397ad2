import { z } from 'zod';

/** One entry of `mcp_servers.<name>`: how to reach a tool server. */
export const McpServerSchema = z.discriminatedUnion('transport', [
  z.strictObject({
    transport: z.literal('stdio'),
    command: z.string().min(1),
    args: z.array(z.string()).default([]),
    env: z.record(z.string(), z.string()).default({}),
    cwd: z.string().optional(),
    per_user: z.boolean().default(false),
    timeout_ms: z.number().int().positive().optional(),
  }),
  z.strictObject({
    transport: z.literal('http'),
    url: z.url({ protocol: /^https?$/ }),
    headers: z.record(z.string(), z.string()).default({}),
    per_user: z.boolean().default(false),
    timeout_ms: z.number().int().positive().optional(),
  }),
]);

/** A configured tool server. */
export type McpServerConfig = z.infer<typeof McpServerSchema>;

/** The whole `mcp_servers` map; names are used in tool names, so they are identifiers. */
export const McpServersSchema = z.record(
  z.string().regex(/^[A-Za-z][A-Za-z0-9_-]*$/, 'server names are letters, digits, _ and -'),
  McpServerSchema,
);
