import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { register } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Run as a process of its own by the lazy-loading test: starts the service with nothing
 * optional configured (no tool servers, no OAuth, no XState inspector, no long-term memory, no
 * tracing), answers one chat turn and /health, and notes which packages the process has loaded;
 * then calls /mcp and the A2A agent card, and notes them again. Prints both lists as JSON. A
 * process of its own, because the test runner's has loaded every package; the service's modules
 * are imported after the recorder is registered, so that it sees them all.
 */
const folder = mkdtempSync(join(tmpdir(), 'svc-lazy-'));
const file = join(folder, 'loaded');
writeFileSync(file, '');
register('./loaded-modules-hook.mjs', import.meta.url, { data: { file } });

/** The packages of node_modules the process has loaded so far, by name. */
function loadedPackages(): string[] {
  const names = readFileSync(file, 'utf8')
    .split('\n')
    .map((url) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1])
    .filter((name): name is string => name !== undefined);
  return [...new Set(names)].sort();
}

const { loadConfig } = await import('../../config/load-config.js');
const { startService } = await import('../../gateway/server/service.js');
const { startFakeLlm } = await import('../../scripts/fake-llm-server.js');
// Not the service harness: its openai client would load the package the service should not.
const { default: winston } = await import('winston');
const logger = winston.createLogger({ silent: true });
const llm = await startFakeLlm();
const config = loadConfig({
  APP_HOST: '127.0.0.1',
  APP_PORT: '0',
  LLM_BASE_URL: llm.url,
  DATA_DIR: 'memory://',
  OTEL_TRACES_EXPORTER: 'none',
  MEMORY_USE_LONG_TERM: 'false',
});
const service = await startService(config, logger);
await service.started;
const chat = await fetch(`${service.url}/v1/chat/completions`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: 'Hello' }] }),
});
const health = await fetch(`${service.url}/health`);
const answered = chat.status === 200 && health.status === 200;
const unused = loadedPackages();

const { connectMcp } = await import('./mcp-client.js');
const mcp = await connectMcp(service.url);
const tools = (await mcp.client.listTools()).tools.map((tool) => tool.name);
await mcp.client.close();
const card = (await (await fetch(`${service.url}/.well-known/agent-card.json`)).json()) as { name?: unknown };
const used = loadedPackages();

await service.close();
await llm.close();
rmSync(folder, { recursive: true, force: true });
process.stdout.write(`${JSON.stringify({ answered, unused, used, tools, cardName: card.name })}\n`);
