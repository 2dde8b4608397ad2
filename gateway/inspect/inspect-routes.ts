import express, { Router, type Request, type RequestHandler, type Response } from 'express';
import { packageFile } from '../../config/package-files.js';
import type { StateGraph } from '../../machines/index.js';
import { toSvg } from '../../machines/render-graph.js';
import type { EventBus, RuntimeEventName, RuntimeEvents } from '../../runtime/observability/event-bus.js';
import type { ConversationStore, SessionRecord, SessionStore } from '../../runtime/ports.js';
import { ServiceError } from '../../runtime/service-error.js';
import { pendingApprovalsOf } from '../../runtime/sessions/pending-approvals.js';
import type { AgentStatus, SessionRegistry } from '../../runtime/sessions/session-registry.js';
import { callerOf } from '../http/api-keys.js';
import { approvalRequestItem } from '../responses/responses-format.js';
import { SseWriter } from '../http/sse-writer.js';
import { checkIdentifier } from '../http/text-rules.js';

/** What the inspector routes are built from. */
export type InspectRoutesDeps = {
  /** `inspect.page`: when false, everything under /inspect is 404. */
  enabled: boolean;
  registry: SessionRegistry;
  sessions: SessionStore;
  /** Where the listed sessions' first messages are read. */
  conversations: ConversationStore;
  events: EventBus;
  graph: StateGraph;
  /** The API key middleware's `authenticate`: every data route runs it (the page shell holds no data and is public). */
  authenticate: RequestHandler;
  /** `inspect.recent_sessions`: how many sessions the list shows. */
  recentSessions: number;
  /** A session's transitions and messages (the agent API's handlers), served under /inspect/sessions/:agent_id/. */
  history: { transitions: RequestHandler; messages: RequestHandler; calls: RequestHandler };
  /** `inspect.trace_url`: a trace's address in the operator's tracing UI, `{trace_id}` where its id goes ('' none). */
  traceUrl: string;
  /** Interval of the keep-alive comment lines of an event stream, in ms (default 15 s). */
  keepAliveMs?: number;
};

/** The /inspect routes, and the event streams they hold open. */
export type InspectRoutes = {
  router: Router;
  /** Event streams open now. */
  readonly openStreams: number;
  /** Ends every open event stream (the server cannot close while one is open). */
  close(): void;
};

/** One session in the inspector's list. */
export type InspectedSession = {
  id: string;
  user_id: string;
  state: string;
  /** The announced status of a live (in-memory) session; null for one only in storage. */
  status: AgentStatus | null;
  live: boolean;
  transitions: number;
  last_active: string;
  /** The session's first user message (its first 200 characters), to tell sessions apart; null before one is stored. */
  first_message: string | null;
  /** The calls the session holds for its user's approval, as `mcp_approval_request` items (from its stored snapshot). */
  pending_approvals: Array<ReturnType<typeof approvalRequestItem>>;
};

/** The runtime events an event stream carries: those of sessions. */
const STREAMED_EVENTS = [
  'session:created',
  'session:state_changed',
  'session:deleted',
  'turn:completed',
  'memory:written',
  'llm:reply',
  'llm:error',
  'tool:call',
] as const satisfies readonly RuntimeEventName[];

type StreamedEvent = (typeof STREAMED_EVENTS)[number];

const PAGE_DIR = packageFile('gateway/inspect/page');

/** Nothing but this origin: the page loads no script, style or font from elsewhere. The SVG drawing carries its own <style>. */
const PAGE_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/**
 * The session inspector, mounted on `/inspect`: the page shell (`/inspect`, its script and
 * style, public), and the data it reads behind the API key: `/inspect/sessions` (live and
 * recent sessions), `/inspect/settings` (where a call's trace opens), `/inspect/graph.svg` (the state graph) and `/inspect/events` (runtime
 * events as SSE). The router's paths are relative to the mount.
 */
export function createInspectRoutes(deps: InspectRoutesDeps): InspectRoutes {
  const router = Router();
  const streams = new Set<() => void>();
  if (!deps.enabled) {
    router.use((req) => {
      throw new ServiceError('NOT_FOUND', `Unknown route: ${req.method} ${req.originalUrl.split('?')[0]} (the inspector page is off: inspect.page)`);
    });
    return { router, openStreams: 0, close: () => {} };
  }

  const svg = toSvg(deps.graph);
  router.get('/sessions', deps.authenticate, async (_req, res) => {
    res.json({ object: 'list', data: await listSessions(deps, callerOf(res)?.userId) });
  });
  // Beside the agent API (which always needs a key): in local mode the page reads history here.
  router.get('/sessions/:agent_id/transitions', deps.authenticate, deps.history.transitions);
  router.get('/sessions/:agent_id/messages', deps.authenticate, deps.history.messages);
  router.get('/sessions/:agent_id/calls', deps.authenticate, deps.history.calls);
  // What the page needs to know of the deployment: where a call's trace opens.
  router.get('/settings', deps.authenticate, (_req, res) => {
    res.json({ trace_url: deps.traceUrl === '' ? null : deps.traceUrl });
  });
  router.get('/graph.svg', deps.authenticate, (_req, res) => {
    res.type('image/svg+xml').set('Cache-Control', 'no-cache').send(svg);
  });
  router.get('/events', deps.authenticate, async (req, res) => {
    const sessionId = optionalQuery(req, 'session_id');
    const boundUser = callerOf(res)?.userId;
    if (sessionId !== undefined && boundUser !== undefined) {
      const session = await deps.sessions.get(sessionId);
      // Another user's session is reported as unknown, as the agent endpoints do.
      if (session && session.userId !== boundUser) throw new ServiceError('NOT_FOUND', `No agent found with id '${sessionId}'.`, { param: 'session_id' });
      // The client may have gone during the look-up: its close has passed, nothing would detach the listeners.
      if (res.closed) return;
    }
    const end = streamEvents(deps, res, { sessionId, userId: boundUser });
    streams.add(end);
    res.on('close', () => streams.delete(end));
  });

  const sendPage: RequestHandler = (_req, res) => res.set(pageHeaders()).sendFile('index.html', { root: PAGE_DIR });
  router.get('/', sendPage);
  router.use(express.static(PAGE_DIR, { index: false, redirect: false, setHeaders: (res) => res.set(pageHeaders()) }));

  return {
    router,
    get openStreams() {
      return streams.size;
    },
    close() {
      for (const end of [...streams]) end();
    },
  };
}

/** How much of a session's first message the list shows. */
const FIRST_MESSAGE_CHARS = 200;

/** Live sessions (the registry) first, then stored ones, most recently active first, at most `recentSessions`. */
async function listSessions(deps: InspectRoutesDeps, userId: string | undefined): Promise<InspectedSession[]> {
  const live = [...deps.registry.getSnapshot().context.sessions.values()]
    .filter((session) => userId === undefined || session.userId === userId)
    .sort((a, b) => b.lastActive - a.lastActive)
    .slice(0, deps.recentSessions);
  const listed = new Set(live.map((session) => session.sessionId));
  const { sessions: stored } = await deps.sessions.list({ limit: deps.recentSessions, ...(userId !== undefined ? { userId } : {}) });
  const [pending, firsts] = await Promise.all([
    pendingApprovalsBySession(deps, live, stored),
    deps.conversations.firstUserMessages([...listed, ...stored.map((session) => session.sessionId)]),
  ]);
  const firstMessage = (sessionId: string) => firsts.get(sessionId)?.slice(0, FIRST_MESSAGE_CHARS) ?? null;
  return [
    ...live.map((session) => ({
      id: session.sessionId,
      user_id: session.userId,
      state: session.state,
      status: session.status,
      live: true,
      transitions: session.transitions,
      last_active: new Date(session.lastActive).toISOString(),
      first_message: firstMessage(session.sessionId),
      pending_approvals: pending.get(session.sessionId) ?? [],
    })),
    ...stored
      .filter((session) => !listed.has(session.sessionId))
      .map((session) => ({
        id: session.sessionId,
        user_id: session.userId,
        state: session.currentState ?? deps.graph.initial,
        status: null,
        live: false,
        transitions: session.transitions,
        last_active: session.lastActive.toISOString(),
        first_message: firstMessage(session.sessionId),
        pending_approvals: pending.get(session.sessionId) ?? [],
      })),
  ].slice(0, deps.recentSessions);
}

/**
 * Each listed session's pending approval requests, from its stored snapshot (the one its last
 * turn wrote): from the stored page, and for a live session not on it, from its own row.
 */
async function pendingApprovalsBySession(
  deps: InspectRoutesDeps,
  live: ReadonlyArray<{ sessionId: string }>,
  stored: readonly SessionRecord[],
): Promise<Map<string, InspectedSession['pending_approvals']>> {
  const rows = new Map(stored.map((session) => [session.sessionId, session]));
  const missing = live.filter((session) => !rows.has(session.sessionId));
  for (const row of await Promise.all(missing.map((session) => deps.sessions.get(session.sessionId)))) {
    if (row) rows.set(row.sessionId, row);
  }
  return new Map([...rows].map(([sessionId, row]) => [sessionId, pendingApprovalsOf(row.snapshot).map(approvalRequestItem)]));
}

/**
 * Streams the session events the caller may see (one session's, or every one) as
 * `data: {"type": "<event>", "at": "<ISO time>", ...payload in snake_case}` frames, with
 * keep-alive comment lines. Returns the function that ends the stream; a client that goes
 * away detaches its listeners.
 */
function streamEvents(deps: InspectRoutesDeps, res: Response, filter: { sessionId?: string; userId?: string }): () => void {
  const sse = new SseWriter(res);
  sse.start();
  // A first comment line: the client knows it is connected before any event.
  sse.heartbeat();
  const userOf = (event: { sessionId: string; userId?: string }) =>
    event.userId ?? deps.registry.getSnapshot().context.sessions.get(event.sessionId)?.userId;
  const forward = (type: StreamedEvent, event: RuntimeEvents[StreamedEvent]) => {
    if (filter.sessionId !== undefined && event.sessionId !== filter.sessionId) return;
    if (filter.userId !== undefined && userOf(event) !== filter.userId) return;
    sse.data(JSON.stringify({ type, at: new Date().toISOString(), ...snakeCaseKeys(event) }));
  };
  const unsubscribe = STREAMED_EVENTS.map((type) => deps.events.on(type, (event) => forward(type, event)));
  const keepAlive = setInterval(() => sse.heartbeat(), deps.keepAliveMs ?? 15_000);
  res.on('close', () => {
    clearInterval(keepAlive);
    for (const off of unsubscribe) off();
  });
  return () => res.end();
}

function snakeCaseKeys(event: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(event).map(([key, value]) => [key.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`), value]));
}

function optionalQuery(req: Request, name: string): string | undefined {
  const value = req.query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new ServiceError('INVALID_REQUEST', `${name} must be given once, as a string`, { param: name });
  return checkIdentifier(value, name);
}

function pageHeaders(): Record<string, string> {
  return { 'Content-Security-Policy': PAGE_SECURITY_POLICY, 'X-Content-Type-Options': 'nosniff', 'Cache-Control': 'no-cache' };
}
