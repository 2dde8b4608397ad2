import { EventEmitter } from 'node:events';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { answerChat } from './fake-llm/answer-chat.js';
import type { EmbeddingsRequestBody } from './fake-llm/answer-embeddings.js';
import { answerEmbeddings } from './fake-llm/answer-embeddings.js';
import { echoReply } from './fake-llm/default-reply.js';
import { FakeLlmHttpError, readJsonObject, sendError, sendJson } from './fake-llm/http-io.js';
import { parseMagicWords } from './fake-llm/magic-words.js';
import { transferReply } from './fake-llm/transfers.js';
import type { ChatRequestBody, FakeMessage } from './fake-llm/messages.js';
import { modelsBody, unixSeconds } from './fake-llm/openai-shapes.js';
import type { ReplyPlan, ReplySource, ReplySpec } from './fake-llm/reply-spec.js';
import { isModifiersOnly, planReply, resolveReply, withBase } from './fake-llm/reply-spec.js';
import type { RuleMatch, Script, ScriptRule } from './fake-llm/script.js';
import { createScript } from './fake-llm/script.js';

export type { ChatRequestBody, FakeMessage, RuleMatch, ScriptRule, ReplySource, ReplySpec, EmbeddingsRequestBody };
export type {
  ContentReply,
  ErrorReply,
  FakeToolCall,
  HangReply,
  ReplyModifiers,
  ToolCallsReply,
} from './fake-llm/reply-spec.js';

/** What the fake LLM does; every field can be changed at run time with `setBehaviour`. */
export type FakeLlmBehaviour = {
  /** The model listed by `/v1/models`, and named in answers to requests that name none. */
  model: string;
  /** The answer when no rule and no magic word applies; null for the built-in echo. */
  defaultReply: ReplySource | null;
  /** Pause between streamed pieces when the reply does not set one, in ms. */
  pieceDelayMs: number;
  /** Whether `[[...]]` magic words in the last user message are obeyed. */
  magicWords: boolean;
  /** Whether `/v1/embeddings` exists (404 otherwise, like a server without embeddings). */
  embeddings: boolean;
  /** The embedding size when a request gives no `dimensions`. */
  embeddingDimensions: number;
  /** When not null, every `/v1` request needs `Authorization: Bearer <apiKey>` (401 otherwise). */
  apiKey: string | null;
  /** Whether requests are kept in `requests`; benchmarks turn it off to keep memory flat. */
  record: boolean;
};

/** Options of `startFakeLlm`: where to listen, the starting behaviour and rules. */
export type FakeLlmOptions = Partial<FakeLlmBehaviour> & {
  /** 0 (the default) picks a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Rules in force from the start, and again after `reset()`. */
  rules?: ScriptRule[];
};

/** A request body as recorded: a chat or an embeddings body. */
export type RecordedBody = Partial<ChatRequestBody> & EmbeddingsRequestBody;

/** One chat or embeddings request the fake LLM received, and what became of it. */
export type RecordedRequest = {
  /** 1, 2, 3... in order of arrival, never reused by `reset()`. */
  seq: number;
  kind: 'chat' | 'embeddings';
  path: string;
  headers: IncomingHttpHeaders;
  body: RecordedBody;
  receivedAt: Date;
  /** The port the request came from (the client's end of its connection). */
  clientPort: number | undefined;
  /** The status sent, once the response has started. */
  status: number | undefined;
  /** The response was written completely. */
  finished: boolean;
  /** The client went away before the response was complete. */
  aborted: boolean;
  /** The server cut the connection on purpose (`cutAfterPieces`). */
  cut: boolean;
};

/** Events about recorded requests: received, answered completely, abandoned by the client, cut by the server. */
export type FakeLlmEvent = 'request' | 'finish' | 'abort' | 'cut';

/** A test's condition on a recorded request. */
export type RequestPredicate = (request: RecordedRequest) => boolean;

/** A running fake LLM server. */
export type FakeLlm = {
  /** Base URL with `/v1`, for `new OpenAI({ baseURL })`. */
  url: string;
  port: number;
  /** Every chat and embeddings request received, in order (while `record` is on). */
  requests: RecordedRequest[];
  /** Appends rules, tried in order before the magic words and the default reply. */
  script(...rules: ScriptRule[]): FakeLlm;
  /** Changes some of the behaviour from now on. */
  setBehaviour(patch: Partial<FakeLlmBehaviour>): FakeLlm;
  /** How many scripted rules still have uses left. */
  pendingRules(): number;
  /** Back to the starting behaviour and rules; forgets recorded requests and event listeners. */
  reset(): void;
  on(event: FakeLlmEvent, listener: (request: RecordedRequest) => void): FakeLlm;
  off(event: FakeLlmEvent, listener: (request: RecordedRequest) => void): FakeLlm;
  /** The first recorded request matching the predicate, already received or still to come. */
  waitForRequest(predicate?: RequestPredicate, timeoutMs?: number): Promise<RecordedRequest>;
  /** The first request matching the predicate whose client went away, already or still to come. */
  waitForAbort(predicate?: RequestPredicate, timeoutMs?: number): Promise<RecordedRequest>;
  /** Stops listening and drops every open connection, hanging ones included. */
  close(): Promise<void>;
};

type ServerState = {
  behaviour: FakeLlmBehaviour;
  script: Script;
  requests: RecordedRequest[];
  events: EventEmitter;
  seq: number;
  created: number;
};

type Route = 'models' | 'chat' | 'embeddings' | 'health';

const MAX_BODY_BYTES = 32 * 1024 * 1024;
const DEFAULT_WAIT_MS = 10_000;
const ROUTES: Record<string, Route> = {
  'GET /v1/models': 'models',
  'POST /v1/chat/completions': 'chat',
  'POST /v1/embeddings': 'embeddings',
  'GET /health': 'health',
};

/** Default behaviour: echo replies, no pacing, magic words on, 256-dimension embeddings, no key. */
export const DEFAULT_BEHAVIOUR: FakeLlmBehaviour = {
  model: 'fake-model',
  defaultReply: null,
  pieceDelayMs: 0,
  magicWords: true,
  embeddings: true,
  embeddingDimensions: 256,
  apiKey: null,
  record: true,
};

/** Starts a scripted OpenAI-compatible LLM server and resolves once it listens. */
export async function startFakeLlm(options: FakeLlmOptions = {}): Promise<FakeLlm> {
  const { port = 0, host = '127.0.0.1', rules = [], ...behaviour } = options;
  const initial: FakeLlmBehaviour = { ...DEFAULT_BEHAVIOUR, ...definedOnly(behaviour) };
  const state: ServerState = {
    behaviour: { ...initial },
    script: createScript(),
    requests: [],
    events: new EventEmitter(),
    seq: 0,
    created: unixSeconds(),
  };
  state.script.add(rules);
  state.events.setMaxListeners(0);
  const server = createServer({ noDelay: true }, (req, res) => void handle(state, req, res));
  server.on('connection', (socket) => socket.setNoDelay(true));
  const listening = await listen(server, port, host);
  return fakeLlmHandle(state, server, listening, () => {
    state.behaviour = { ...initial };
    state.script.clear();
    state.script.add(rules);
    state.requests.length = 0;
    state.events.removeAllListeners();
  });
}

function fakeLlmHandle(state: ServerState, server: Server, address: AddressInfo, reset: () => void): FakeLlm {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const fake: FakeLlm = {
    url: `http://${host}:${address.port}/v1`,
    port: address.port,
    requests: state.requests,
    script(...rules) {
      state.script.add(rules);
      return fake;
    },
    setBehaviour(patch) {
      state.behaviour = { ...state.behaviour, ...definedOnly(patch) };
      return fake;
    },
    pendingRules: () => state.script.pending(),
    reset,
    on(event, listener) {
      state.events.on(event, listener);
      return fake;
    },
    off(event, listener) {
      state.events.off(event, listener);
      return fake;
    },
    waitForRequest: (predicate, timeoutMs) => waitFor(state, 'request', () => true, predicate, timeoutMs),
    waitForAbort: (predicate, timeoutMs) => waitFor(state, 'abort', (request) => request.aborted, predicate, timeoutMs),
    close: () => closeServer(server),
  };
  return fake;
}

/** The patch without its undefined fields, which therefore keep their current value. */
function definedOnly<T extends object>(patch: T): T {
  return Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== undefined)) as T;
}

async function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server.address() as AddressInfo;
}

function closeServer(server: Server): Promise<void> {
  if (!server.listening) return Promise.resolve();
  const closed = new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
  server.closeAllConnections();
  return closed;
}

function waitFor(
  state: ServerState,
  event: FakeLlmEvent,
  happened: RequestPredicate,
  predicate: RequestPredicate = () => true,
  timeoutMs = DEFAULT_WAIT_MS,
): Promise<RecordedRequest> {
  const past = state.requests.find((request) => happened(request) && predicate(request));
  if (past !== undefined) return Promise.resolve(past);
  return new Promise((resolve, reject) => {
    const onEvent = (request: RecordedRequest): void => {
      if (!predicate(request)) return;
      clearTimeout(timer);
      state.events.off(event, onEvent);
      resolve(request);
    };
    const timer = setTimeout(() => {
      state.events.off(event, onEvent);
      reject(new Error(`fake LLM: no matching '${event}' within ${timeoutMs} ms`));
    }, timeoutMs);
    state.events.on(event, onEvent);
  });
}

async function handle(state: ServerState, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    await route(state, req, res);
  } catch (error) {
    failed(res, error);
  }
}

function failed(res: ServerResponse, error: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const status = error instanceof FakeLlmHttpError ? error.status : 500;
  sendError(res, status, error instanceof Error ? error.message : String(error));
}

async function route(state: ServerState, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
  const target = ROUTES[`${req.method ?? ''} ${path}`];
  if (target === 'health') return sendJson(res, 200, { status: 'ok' });
  if (target === undefined || (target === 'embeddings' && !state.behaviour.embeddings)) {
    return sendError(res, 404, `Unknown route: ${req.method ?? ''} ${path}`);
  }
  if (target === 'models') {
    if (!isAuthorised(state, req)) return unauthorised(res);
    return sendJson(res, 200, modelsBody(state.behaviour.model, state.created));
  }
  const body = await readJsonObject(req, MAX_BODY_BYTES);
  const record = recordRequest(state, req, res, target, path, body);
  if (!isAuthorised(state, req)) return unauthorised(res);
  if (target === 'embeddings') return answerEmbeddingsRequest(state, res, body);
  return answerChatRequest(state, res, record, body);
}

function isAuthorised(state: ServerState, req: IncomingMessage): boolean {
  const { apiKey } = state.behaviour;
  return apiKey === null || req.headers.authorization === `Bearer ${apiKey}`;
}

function unauthorised(res: ServerResponse): void {
  sendError(res, 401, 'Incorrect API key provided', 'invalid_request_error', 'invalid_api_key');
}

function recordRequest(
  state: ServerState,
  req: IncomingMessage,
  res: ServerResponse,
  kind: 'chat' | 'embeddings',
  path: string,
  body: Record<string, unknown>,
): RecordedRequest {
  state.seq += 1;
  const record: RecordedRequest = {
    seq: state.seq,
    kind,
    path,
    headers: req.headers,
    body: body as RecordedBody,
    receivedAt: new Date(),
    clientPort: req.socket.remotePort,
    status: undefined,
    finished: false,
    aborted: false,
    cut: false,
  };
  if (state.behaviour.record) state.requests.push(record);
  res.once('close', () => settle(state, res, record));
  state.events.emit('request', record);
  return record;
}

function settle(state: ServerState, res: ServerResponse, record: RecordedRequest): void {
  record.status = res.headersSent ? res.statusCode : undefined;
  record.finished = res.writableFinished;
  record.aborted = !record.finished && !record.cut;
  state.events.emit(record.finished ? 'finish' : record.cut ? 'cut' : 'abort', record);
}

function answerEmbeddingsRequest(state: ServerState, res: ServerResponse, body: EmbeddingsRequestBody): void {
  answerEmbeddings(res, body, { model: state.behaviour.model, dimensions: state.behaviour.embeddingDimensions });
}

async function answerChatRequest(
  state: ServerState,
  res: ServerResponse,
  record: RecordedRequest,
  body: Record<string, unknown>,
): Promise<void> {
  if (!Array.isArray(body.messages)) throw new FakeLlmHttpError(400, "'messages' must be an array");
  const chat = body as ChatRequestBody;
  const plan = planReply(decideReply(state, chat), state.behaviour.pieceDelayMs);
  const model = typeof chat.model === 'string' ? chat.model : state.behaviour.model;
  const onCut = (): void => {
    record.cut = true;
  };
  await answerChat({ res, signal: closeSignal(res, plan), body: chat, model, onCut }, plan);
}

const NEVER_ABORTED = new AbortController().signal;
const CLOSED = new Error('connection closed');

/**
 * A signal that fires when the connection closes, for answers that wait. An answer that never
 * waits writes in one go, and an AbortController per request is a visible cost under load.
 */
function closeSignal(res: ServerResponse, plan: ReplyPlan): AbortSignal {
  const waits = plan.kind === 'answer' ? plan.delayMs > 0 || plan.pieceDelayMs > 0 : plan.kind === 'error' && plan.delayMs > 0;
  if (!waits) return NEVER_ABORTED;
  const controller = new AbortController();
  res.once('close', () => controller.abort(CLOSED));
  return controller.signal;
}

/** The first of: a scripted rule, a hand-off (see `transferReply`), the magic words, the default reply (or the echo under them all). */
function decideReply(state: ServerState, body: ChatRequestBody): ReplySpec {
  const { behaviour } = state;
  const chosen = state.script.take(body) ?? (behaviour.magicWords ? (transferReply(body) ?? parseMagicWords(body.messages)) : undefined);
  if (chosen !== undefined && !isModifiersOnly(chosen)) return chosen;
  const echo = echoReply(body.messages);
  const fallback = behaviour.defaultReply === null ? echo : withBase(resolveReply(behaviour.defaultReply, body), echo);
  return chosen === undefined ? fallback : withBase(chosen, fallback);
}
