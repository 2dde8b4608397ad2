import type { RequestHandler } from 'express';
import { checkLlmServer } from '../runtime/llm-health.js';

/** `GET /health`: the specification's health response. */
export function createHealthRoute(deps: { llmBaseUrl: string; llmApiKey: string; timeoutMs: number; port: () => number }): RequestHandler {
  return async (_req, res) => {
    const llmServer = await checkLlmServer(deps.llmBaseUrl, deps.timeoutMs, deps.llmApiKey);
    res.json({ status: 'ok', llm_server: llmServer, port: deps.port() });
  };
}
