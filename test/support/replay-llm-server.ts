/**
 * A replay upstream for tests: an HTTP server that answers `/v1/chat/completions`, `/v1/models` and a
 * server's side endpoints in the exact wire shapes of one real LLM server (a fixture from
 * test/fixtures/llm-servers). What the model says is scripted per test; how the server wraps it, refuses
 * it or truncates it is the fixture's job.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SERVER_FIXTURES, type ServerName } from '../fixtures/llm-servers/index.js';
import { countPromptTokens } from '../fixtures/llm-servers/prompt-tokens.js';
import { DEFAULT_SERVER_SETUP, type ChatRequest, type HttpReply, type ServerFixture, type ServerSetup } from '../fixtures/llm-servers/server-fixture.js';
import { requestedMaxTokens } from '../fixtures/llm-servers/model-reply.js';
import { ALTERNATION_ERROR, rolesAlternate } from './replay-llm/prompt-checks.js';
import { ScriptBook, type ReplayFailure, type ReplayRule } from './replay-llm/script-book.js';

export type { ReplayFailure, ReplayMatch, ReplayRule } from './replay-llm/script-book.js';

/** How to start a replay server. */
export interface ReplayLlmOptions {
  server: ServerName | ServerFixture;
  setup?: Partial<ServerSetup>;
  /** The served model name; the fixture's default (e.g. "Qwen/Qwen3-8B", "qwen3:8b") when absent. */
  model?: string;
}

/** One request as received. */
export interface ReceivedRequest {
  method: string;
  path: string;
  /** The parsed JSON body, the raw text when it is not JSON, undefined when empty. */
  body: any;
  headers: IncomingHttpHeaders;
  /** Set when the server (Ollama) silently dropped messages or cut the prompt to fit its window. */
  truncated?: { dropped: number; promptTokens: number };
}

/** A running replay server. */
export interface ReplayLlm {
  /** Base URL with /v1, as LLM_BASE_URL. */
  readonly url: string;
  readonly origin: string;
  readonly fixture: ServerFixture;
  /** The current setup (a copy). */
  readonly currentSetup: ServerSetup;
  /** Changes the simulated server flags from the next request on. */
  setup(patch: Partial<ServerSetup>): void;
  /** Adds scripted turns; the first matching rule with uses left answers, else `Echo: <last user text>`. */
  script(...rules: ReplayRule[]): void;
  /** Makes the next chat requests fail with these statuses, in the server's error shape. */
  fail(...failures: ReplayFailure[]): void;
  /** Every request received, in order. */
  readonly requests: ReceivedRequest[];
  /** How many chat prompts the server truncated silently (Ollama). */
  readonly truncations: number;
  /** Forgets requests, rules, failures and truncations, and restores the starting setup. */
  reset(): void;
  close(): Promise<void>;
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.on('error', reject);
  });
}

function parseBody(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function send(response: ServerResponse, reply: HttpReply): void {
  response.writeHead(reply.status, { 'content-type': reply.contentType, ...reply.headers });
  response.end(reply.body);
}

function isChatRequest(body: unknown): body is ChatRequest {
  return !!body && typeof body === 'object' && Array.isArray((body as { messages?: unknown }).messages);
}

/** Starts a replay server on a free loopback port. */
export async function startReplayLlm(options: ReplayLlmOptions): Promise<ReplayLlm> {
  const fixture = typeof options.server === 'string' ? SERVER_FIXTURES[options.server] : options.server;
  if (!fixture) throw new Error(`unknown LLM server fixture '${String(options.server)}'`);
  const servedModel = options.model ?? fixture.defaultModel;
  const initialSetup: ServerSetup = { ...DEFAULT_SERVER_SETUP, ...options.setup };
  let setup: ServerSetup = { ...initialSetup };
  const book = new ScriptBook();
  const requests: ReceivedRequest[] = [];
  let truncations = 0;

  async function writeStream(response: ServerResponse, frames: readonly string[]): Promise<void> {
    response.writeHead(200, { 'content-type': fixture.contentTypes.stream, 'cache-control': 'no-cache' });
    for (const frame of frames) {
      // One write per event, so clients see the chunk boundaries the real server produces.
      if (!response.write(`data: ${frame}\n\n`)) await new Promise((resolve) => response.once('drain', resolve));
    }
    response.end();
  }

  async function handleChat(record: ReceivedRequest, response: ServerResponse): Promise<void> {
    const failure = book.takeFailure();
    if (failure) {
      const reply = fixture.httpError(failure.status, failure.message);
      send(response, failure.retryAfter === undefined ? reply : { ...reply, headers: { ...reply.headers, 'retry-after': failure.retryAfter } });
      return;
    }
    if (!isChatRequest(record.body)) {
      send(response, fixture.httpError(400, 'messages is required'));
      return;
    }
    const current = { ...setup };
    let request: ChatRequest = record.body;
    if (!current.toolCallParser) {
      const refusal = fixture.toolsWithoutParserError(request);
      if (refusal) return send(response, refusal);
    }
    if (current.requireAlternation && !rolesAlternate(request.messages)) {
      const refusal = fixture.templateError(ALTERNATION_ERROR);
      if (refusal) return send(response, refusal);
    }
    let promptTokens = countPromptTokens(request.messages, request.tools);
    const truncation = promptTokens > current.contextWindow ? fixture.truncatePrompt(request, current.contextWindow) : null;
    if (truncation) {
      truncations += 1;
      record.truncated = { dropped: truncation.dropped, promptTokens: truncation.promptTokens };
      request = { ...request, messages: truncation.messages };
      promptTokens = truncation.promptTokens;
    } else {
      const refusal = fixture.contextLengthError(promptTokens, current.contextWindow, requestedMaxTokens(request));
      if (refusal) return send(response, refusal);
    }

    const turn = book.takeTurn(request);
    const requestId = record.headers['x-request-id'];
    const context = { servedModel, created: Math.floor(Date.now() / 1000), promptTokens, requestId: typeof requestId === 'string' ? requestId : undefined };
    if (request.stream === true) await writeStream(response, fixture.stream(turn, request, current, context));
    else send(response, { status: 200, contentType: fixture.contentTypes.json, body: fixture.body(turn, request, current, context) });
  }

  async function handle(incoming: IncomingMessage, response: ServerResponse): Promise<void> {
    const method = incoming.method ?? 'GET';
    const path = new URL(incoming.url ?? '/', 'http://replay').pathname;
    const record: ReceivedRequest = { method, path, body: parseBody(await readBody(incoming)), headers: incoming.headers };
    requests.push(record);

    if (method === 'POST' && path === '/v1/chat/completions') return handleChat(record, response);
    if (method === 'GET' && path === '/v1/models') {
      return send(response, { status: 200, contentType: fixture.contentTypes.json, body: fixture.models({ ...setup }, servedModel) });
    }
    const side = fixture.sideEndpoints.find((endpoint) => endpoint.method === method && endpoint.paths.includes(path));
    if (side) return send(response, side.render(record.body, { ...setup }, servedModel));
    send(response, fixture.notFound());
  }

  const server = createServer((incoming, response) => {
    handle(incoming, response).catch((error: unknown) => {
      if (!response.headersSent) send(response, fixture.httpError(500, error instanceof Error ? error.message : String(error)));
      else response.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;

  return {
    url: `${origin}/v1`,
    origin,
    fixture,
    get currentSetup() {
      return { ...setup };
    },
    setup(patch) {
      setup = { ...setup, ...patch };
    },
    script(...rules) {
      book.addRules(rules);
    },
    fail(...failures) {
      book.addFailures(failures);
    },
    requests,
    get truncations() {
      return truncations;
    },
    reset() {
      requests.length = 0;
      book.clear();
      truncations = 0;
      setup = { ...initialSetup };
    },
    close() {
      return new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      });
    },
  };
}
