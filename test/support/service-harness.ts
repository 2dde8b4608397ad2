import OpenAI from 'openai';
import winston from 'winston';
import { loadConfig, type AppConfig } from '../../config/load-config.js';
import { startService, type RunningService } from '../../gateway/server/service.js';
import { startFakeLlm, type FakeLlm, type FakeLlmOptions } from '../../scripts/fake-llm-server.js';

/** The service on an ephemeral port in front of the scripted LLM, with the official client. */
export type TestService = {
  service: RunningService;
  llm: FakeLlm;
  config: AppConfig;
  /** The OpenAI base URL of the service (`…/v1`). */
  baseURL: string;
  /** The official `openai` client pointed at the service. */
  client: OpenAI;
  /** Stops the service, then (unless it was handed in) the scripted LLM. */
  close(): Promise<void>;
};

/** A logger that keeps quiet in tests unless TEST_LOG_LEVEL asks otherwise. */
export function testLogger(): winston.Logger {
  const level = process.env.TEST_LOG_LEVEL;
  return winston.createLogger({ level: level ?? 'error', silent: !level, transports: [new winston.transports.Console()] });
}

/**
 * Starts the scripted LLM (or uses `llm`) and the service on port 0 with an in-memory
 * embedded database unless `env` names another (DATA_DIR or DB_URL). Resolves once the
 * service's background start-up work has settled too (tool servers connected or failed), unless
 * `listeningOnly`: then as soon as it listens.
 */
export async function startTestService(
  options: { env?: NodeJS.ProcessEnv; llm?: FakeLlm; llmOptions?: FakeLlmOptions; listeningOnly?: boolean; logger?: winston.Logger } = {},
): Promise<TestService> {
  const llm = options.llm ?? (await startFakeLlm(options.llmOptions));
  const config = loadConfig({
    APP_HOST: '127.0.0.1',
    APP_PORT: '0',
    LLM_BASE_URL: llm.url,
    DATA_DIR: 'memory://',
    // Tests are not throttled unless they ask for limits.
    LIMITS_REQUESTS_PER_MINUTE: '0',
    LIMITS_CONCURRENT_REQUESTS: '0',
    ...options.env,
  });
  const service = await startService(config, options.logger ?? testLogger());
  if (!options.listeningOnly) await service.started;
  const baseURL = `${service.url}/v1`;
  return {
    service,
    llm,
    config,
    baseURL,
    client: new OpenAI({ baseURL, apiKey: 'placeholder', maxRetries: 0 }),
    close: async () => {
      await service.close();
      if (!options.llm) await llm.close();
    },
  };
}

/** Reads a whole SSE response body as text. */
export async function readText(response: Response): Promise<string> {
  return new TextDecoder().decode(await response.arrayBuffer());
}

/** The `data:` payloads of an SSE body, in order. */
export function sseData(body: string): string[] {
  return body
    .split('\n\n')
    .filter((event) => event.startsWith('data: '))
    .map((event) => event.slice('data: '.length));
}

/** A turn as a chat client sends it: the user's and the assistant's messages. */
export type ChatTurnMessage = { role: 'user' | 'assistant'; content: string };

/**
 * POSTs `messages` to the service's chat completions over plain fetch (the session named by
 * `sessionId` when given): the status, the answer's content and the session the service names.
 */
export async function chatOverFetch(service: TestService, messages: ChatTurnMessage[], sessionId?: string): Promise<{ status: number; content: string; sessionId: string | null }> {
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (sessionId) headers['X-Session-ID'] = sessionId;
  const response = await fetch(`${service.baseURL}/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ messages }) });
  const body = (await response.json()) as { choices?: Array<{ message: { content: string } }> };
  return { status: response.status, content: body.choices?.[0]?.message.content ?? '', sessionId: response.headers.get('x-session-id') };
}
