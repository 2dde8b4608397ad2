import type { RequestHandler } from 'express';
import { checkLlmServer } from '../../runtime/llm/llm-health.js';
import type { ServerReport } from '../../runtime/llm/server-profile.js';
import type { ToolServerStatus } from '../../runtime/tools/tool-runner.js';

/** What the health route reads. */
export type HealthDeps = {
  llmBaseUrl: string;
  llmApiKey: string;
  timeoutMs: number;
  /** What the service learnt of the LLM server. */
  llmProfile: () => ServerReport;
  port: () => number;
  toolStatus: () => Record<string, ToolServerStatus>;
  /** What the service still starts in the background (e.g. `mcp_servers`); empty once all is up. */
  starting: () => string[];
};

/**
 * `GET /health`: the specification's fields (`status`, `llm_server`, `port`), plus `starting`
 * (what the service still starts in the background; empty once all is up), `llm` (what the
 * service learnt of the LLM server: its model, context window, whether it streams usage, the
 * reasoning and tool-call shapes it has sent, its template's rules) and each tool server's
 * status when any is configured. Server error texts stay in the log, not here.
 */
export function createHealthRoute(deps: HealthDeps): RequestHandler {
  return async (_req, res) => {
    const llmServer = await checkLlmServer(deps.llmBaseUrl, deps.timeoutMs, deps.llmApiKey);
    const servers = Object.entries(deps.toolStatus());
    const body: Record<string, unknown> = { status: 'ok', llm_server: llmServer, port: deps.port(), starting: deps.starting(), llm: deps.llmProfile() };
    if (servers.length > 0) {
      body.mcp_servers = Object.fromEntries(servers.map(([name, server]) => [name, { status: server.status, tools: server.tools, attempts: server.attempts }]));
    }
    res.json(body);
  };
}
