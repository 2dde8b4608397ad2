import type { AddressInfo } from 'node:net';
import type { ToolServerStatus } from '../../runtime/tools/tool-runner.js';

/** What the line a service prints once it listens says. */
export type StartFacts = {
  /** The address the server is bound to, as `server.address()` (or a cluster worker's `listening` event) gives it. */
  bound: Pick<AddressInfo, 'address' | 'port'>;
  /** Workers of this instance (1: the process serves itself). */
  workers: number;
  /** No API keys: local mode, where /inspect and /metrics answer this machine only. */
  localMode: boolean;
  llmBaseUrl: string;
  database: string;
};

/**
 * The start line: the address actually bound (a wildcard named as such, with the address this
 * machine reaches it at), the OpenAI base URL, and what local mode keeps to this machine.
 */
export function startLine(facts: StartFacts): string {
  const { address, port } = facts.bound;
  const wildcard = address === '0.0.0.0' || address === '::';
  const where = address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
  const local = wildcard ? (address === '::' ? `[::1]` : '127.0.0.1') : address.includes(':') ? `[${address}]` : address;
  const serving = facts.workers > 1 ? `${facts.workers} workers listening on port ${port}, bound to` : 'svc-agent listening on';
  const scope = wildcard ? ` (every ${address === '::' ? 'interface' : 'IPv4 interface'} of this machine)` : '';
  const mode = facts.localMode
    ? '; local mode (no API_KEYS): /inspect and /metrics answer clients on this machine only'
    : '; API keys required';
  return `${serving} ${where}${scope}, OpenAI base URL http://${local}:${port}/v1, LLM server ${facts.llmBaseUrl}, database ${facts.database}${mode}`;
}

/**
 * The line written once the tool servers' first connections are done: each server's status and
 * the tools it offers, from the registry's `status()` as /health reads it (a tool that only
 * runs as a task is listed by its server but not offered, so not counted).
 */
export function toolServersLine(status: Record<string, ToolServerStatus>): string {
  const servers = Object.entries(status).map(([name, server]) => `${name} ${server.status}, ${server.tools} ${server.tools === 1 ? 'tool' : 'tools'}`);
  return `tool servers: ${servers.join('; ')}`;
}
