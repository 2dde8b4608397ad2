import { z } from 'zod';

/**
 * Which calls of a server's tools wait for the user's approval: `never`, `always`, or the
 * listed tools (by their name on the server).
 */
export const RequireApprovalSchema = z
  .union([z.enum(['never', 'always']), z.array(z.string().min(1, 'a tool name must not be empty'))], {
    error: 'must be never, always, or a list of the tool names (as the server names them) whose calls wait for approval',
  })
  .default('never');

/**
 * Whether every tool of the server may be run again with the same arguments to no further
 * effect: a call whose outcome the service lost (its process died during it) is then run again
 * instead of being answered as of unknown outcome. Tools may say so themselves (MCP annotations
 * `readOnlyHint`, `idempotentHint`).
 */
const IdempotentSchema = z.boolean({ error: 'must be true or false' }).default(false);

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
    require_approval: RequireApprovalSchema,
    idempotent: IdempotentSchema,
  }),
  z.strictObject({
    transport: z.literal('http'),
    url: z.url({ protocol: /^https?$/ }),
    headers: z.record(z.string(), z.string()).default({}),
    per_user: z.boolean().default(false),
    timeout_ms: z.number().int().positive().optional(),
    require_approval: RequireApprovalSchema,
    idempotent: IdempotentSchema,
  }),
]);

/** A configured tool server. */
export type McpServerConfig = z.infer<typeof McpServerSchema>;

/** Whether calls of `tool` (its name on the server) wait for the user's approval under the server's `require_approval`. */
export function requiresApproval(config: Pick<McpServerConfig, 'require_approval'>, tool: string): boolean {
  const rule = config.require_approval;
  return rule === 'always' || (Array.isArray(rule) && rule.includes(tool));
}

/** The whole `mcp_servers` map; names are used in tool names, so they are identifiers. */
export const McpServersSchema = z.record(
  z.string().regex(/^[A-Za-z][A-Za-z0-9_-]*$/, 'server names are letters, digits, _ and -'),
  McpServerSchema,
);
