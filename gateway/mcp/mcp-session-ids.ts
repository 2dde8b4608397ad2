import { createHash, randomBytes } from 'node:crypto';

/**
 * An MCP session id as this service mints it: 32 random hexadecimal digits, then `-e` when the
 * client said at initialization that it answers form elicitations. The id carries all the
 * session's own state, so any worker or instance can serve it with nothing shared in memory;
 * a client that adds `-e` itself only changes how it is asked for approvals.
 */
const MCP_SESSION_ID = /^([0-9a-f]{32})(-e)?$/;

/** What an MCP session id says about its client. */
export type McpSessionFacts = { elicits: boolean };

/** A new MCP session id for a client that does (or does not) answer form elicitations. */
export function newMcpSessionId(facts: McpSessionFacts): string {
  return `${randomBytes(16).toString('hex')}${facts.elicits ? '-e' : ''}`;
}

/** What an id this service minted says, or undefined for any other value (answered as an unknown session). */
export function mcpSessionFacts(id: string): McpSessionFacts | undefined {
  const match = MCP_SESSION_ID.exec(id);
  return match ? { elicits: match[2] !== undefined } : undefined;
}

/**
 * The agent session an MCP session's conversation lives in: derived from the MCP session id and
 * the acting user, so any process finds the same one, and another user who presents the same
 * MCP session id reaches a session of their own, never this one.
 */
export function agentSessionOf(mcpSessionId: string, userId: string): string {
  const digest = createHash('sha256').update(`${userId}\n${mcpSessionId}`, 'utf8').digest('hex');
  return `mcp-${digest.slice(0, 32)}`;
}

/**
 * True when the client's capabilities (an initialize request's `capabilities`) include form
 * elicitation: `elicitation: {}` (form, as before modes existed) or `elicitation: { form: … }`.
 */
export function elicitsForms(capabilities: unknown): boolean {
  const elicitation = (capabilities as { elicitation?: unknown } | undefined)?.elicitation;
  if (typeof elicitation !== 'object' || elicitation === null) return false;
  return 'form' in elicitation || !('url' in elicitation);
}
