import { createHash } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Router, type Request, type RequestHandler, type Response } from 'express';
import type { ConversationRecord, SessionCursor, SessionRecord, StoredTransition } from '../../runtime/ports.js';
import { ServiceError } from '../../runtime/service-error.js';
import { pendingApprovalsOf } from '../../runtime/sessions/pending-approvals.js';
import { usageTotal, withTotal } from '../../runtime/sessions/call-records.js';
import type { ToolRunner } from '../../runtime/tools/tool-runner.js';
import { actingUser, callerOf } from '../http/api-keys.js';
import { listLimit, singleQuery } from '../http/list-query.js';
import { approvalRequestItem } from '../responses/responses-format.js';
import { callEntry } from './call-format.js';
import { deleteSession, type SessionDeletionDeps } from '../../runtime/sessions/session-deletion.js';
import { checkIdentifier, isValidIdentifier } from '../http/text-rules.js';

/** The announced agent resource. */
export type AgentResource = {
  id: string;
  object: 'agent';
  name: string;
  status: 'active';
  user_id: string;
  model: { provider: string; name: string };
  memory: { total_entries: number; working_memory: number; long_term_memory: number };
  state: { current: string; transitions: number };
  tools: string[];
  /** Tokens its LLM calls used: the totals, and by model. */
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number; by_model: Record<string, { prompt_tokens: number; completion_tokens: number; total_tokens: number }> };
  /** Calls of the service's tools the agent holds for its user's approval (`require_approval`), as `mcp_approval_request` items. */
  pending_approvals: Array<ReturnType<typeof approvalRequestItem>>;
  created_at: string;
  last_active: string;
};

/** The answer of `DELETE /v1/agents/{agent_id}`. */
export type AgentDeletion = {
  id: string;
  object: 'agent.deleted';
  status: 'deleted';
  memory_exported: boolean;
  export_location: string | null;
  deleted_at: string;
};

/** One entry of an agent's transition log, as `GET /v1/agents/{agent_id}/transitions` and the export give it. */
export type TransitionEntry = { id: number; at: string; from: string; to: string; reason: string | null };

/** One message of an agent's transcript, as `GET /v1/agents/{agent_id}/messages` and the export give it. */
export type TranscriptEntry = { id: number; role: string; content: string; created_at: string };

/** A page of an agent's transitions or transcript, oldest first; `next_after` is the `after` of the next page. */
export type LogPage<T> = { object: 'list'; data: T[]; has_more: boolean; next_after: number | null };

/** What the agent routes are built from. */
export type AgentsRouterDeps = SessionDeletionDeps & {
  tools: ToolRunner;
  /** The API key guard every agent route sits behind. */
  requireKey: RequestHandler;
  settings: {
    /** `llm.model`. */
    model: string;
    /** `memory.short_term_turns`. */
    shortTermTurns: number;
    /** The graph's initial state, reported before a session's first turn ends. */
    initialState: string;
    /** `agents.export_dir`. */
    exportDir: string;
  };
};

const EXPORT_PAGE = 1000;
/** The latest time a Date can hold, in µs since the epoch (PostgreSQL's timestamps go further). */
const MAX_CURSOR_MICROS = 8_640_000_000_000_000_000n;

/**
 * `GET /v1/agents`, `GET /v1/agents/{agent_id}` (with its `/transitions` and `/messages`) and
 * `DELETE /v1/agents/{agent_id}`, always behind an API key.
 */
export function createAgentsRouter(deps: AgentsRouterDeps): Router {
  const router = Router();
  router.use('/v1/agents', deps.requireKey);

  router.get('/v1/agents', async (req, res) => {
    const limit = listLimit(req);
    const after = parseCursor(req);
    const named = actingUser(res, [{ value: singleQuery(req, 'user_id'), param: 'user_id' }]);
    const userId = named === undefined ? undefined : checkIdentifier(named, 'user_id');
    const page = await deps.sessions.list({ limit, ...(userId !== undefined ? { userId } : {}), ...(after ? { after } : {}) });
    res.json({
      object: 'list',
      data: await Promise.all(page.sessions.map((session) => agentResource(deps, session))),
      has_more: page.next !== null,
      next_cursor: page.next && encodeCursor(page.next),
    });
  });

  router.get('/v1/agents/:agent_id', async (req, res) => {
    res.json(await agentResource(deps, await liveSession(deps, req, res)));
  });

  const history = createHistoryHandlers(deps);
  router.get('/v1/agents/:agent_id/transitions', history.transitions);
  router.get('/v1/agents/:agent_id/messages', history.messages);
  router.get('/v1/agents/:agent_id/calls', history.calls);

  router.delete('/v1/agents/:agent_id', async (req, res) => {
    const options = parseDeleteBody(req.body);
    const { sessionId } = await visibleSession(deps, req, res);
    const deletion = await deleteSession(deps, sessionId, {
      preserveMemory: options.preserveMemory,
      ...(options.exportData ? { exportFirst: (session: SessionRecord) => exportAgent(deps, session) } : {}),
    });
    if (!deletion) throw notFound(sessionId);
    res.json(deletionBody(sessionId, deletion.exportLocation !== null, deletion.exportLocation, deletion.deletedAt));
  });

  return router;
}

/**
 * A session's transition log, transcript and recorded calls, paged oldest first
 * (`?limit=&after=`), for the `:agent_id` in the path and a caller allowed to see it. The
 * agent API and the inspector page serve the same handlers, each behind its own key rule.
 */
export function createHistoryHandlers(deps: Pick<AgentsRouterDeps, 'sessions' | 'conversations' | 'calls'>): {
  transitions: RequestHandler;
  messages: RequestHandler;
  calls: RequestHandler;
} {
  return {
    transitions: async (req, res) => {
      const { limit, afterId } = parseLogPage(req);
      const { sessionId } = await liveSession(deps, req, res);
      const rows = await deps.sessions.listTransitions(sessionId, { limit: limit + 1, ...(afterId !== undefined ? { afterId } : {}) });
      res.json(logPage(rows, limit, transitionEntry));
    },
    messages: async (req, res) => {
      const { limit, afterId } = parseLogPage(req);
      const { sessionId } = await liveSession(deps, req, res);
      const rows = await deps.conversations.page(sessionId, { limit: limit + 1, ...(afterId !== undefined ? { afterId } : {}) });
      res.json(logPage(rows, limit, transcriptEntry));
    },
    calls: async (req, res) => {
      const { limit, afterId } = parseLogPage(req);
      const { sessionId } = await liveSession(deps, req, res);
      const rows = await deps.calls.page(sessionId, { limit: limit + 1, ...(afterId !== undefined ? { afterId } : {}) });
      res.json(logPage(rows, limit, callEntry));
    },
  };
}

/** The session named in the path, when it exists and the caller may see it; otherwise 404. */
async function visibleSession(deps: Pick<AgentsRouterDeps, 'sessions'>, req: Request, res: Response): Promise<SessionRecord> {
  const agentId = checkIdentifier(String(req.params.agent_id), 'agent_id');
  const session = await deps.sessions.get(agentId);
  const bound = callerOf(res)?.userId;
  // Another user's agent is reported as unknown: a bound key does not learn it exists.
  if (!session || (bound !== undefined && session.userId !== bound)) throw notFound(agentId);
  return session;
}

/** The visible session named in the path, unless it is deleted (404, as for an unknown one). */
async function liveSession(deps: Pick<AgentsRouterDeps, 'sessions'>, req: Request, res: Response): Promise<SessionRecord> {
  const session = await visibleSession(deps, req, res);
  if (session.deletedAt) throw notFound(session.sessionId);
  return session;
}

async function agentResource(deps: AgentsRouterDeps, session: SessionRecord): Promise<AgentResource> {
  const live = deps.supervisor.registry.getSnapshot().context.sessions.get(session.sessionId);
  const [total, longTerm] = await Promise.all([
    deps.conversations.count(session.sessionId),
    deps.memories ? deps.memories.countBySession(session.sessionId) : Promise.resolve(0),
  ]);
  const lastActive = Math.max(session.lastActive.getTime(), live?.lastActive ?? 0);
  return {
    id: session.sessionId,
    object: 'agent',
    name: `agent-${session.sessionId.slice(0, 8)}`,
    status: 'active',
    user_id: session.userId,
    model: { provider: 'openai-compatible', name: deps.settings.model },
    memory: { total_entries: total, working_memory: Math.min(total, deps.settings.shortTermTurns), long_term_memory: longTerm },
    state: {
      current: live?.state ?? session.currentState ?? deps.settings.initialState,
      transitions: Math.max(live?.transitions ?? 0, session.transitions),
    },
    tools: deps.tools.definitions().flatMap((tool) => (tool.type === 'function' ? [tool.function.name] : [])),
    usage: { ...usageTotal(session.usage), by_model: Object.fromEntries(Object.entries(session.usage).map(([model, tokens]) => [model, withTotal(tokens)])) },
    pending_approvals: pendingApprovalsOf(session.snapshot).map(approvalRequestItem),
    created_at: session.createdAt.toISOString(),
    last_active: new Date(lastActive).toISOString(),
  };
}

/** Writes the complete export of a session; returns its absolute path. */
async function exportAgent(deps: AgentsRouterDeps, session: SessionRecord): Promise<string> {
  const transcript = await readWhole((page) => deps.conversations.page(session.sessionId, page));
  const transitions = await readWhole((page) => deps.sessions.listTransitions(session.sessionId, page));
  const memories = deps.memories ? await deps.memories.listBySession(session.sessionId) : [];
  const exportedAt = new Date();
  const body = {
    object: 'agent.export',
    exported_at: exportedAt.toISOString(),
    agent: {
      id: session.sessionId,
      user_id: session.userId,
      created_at: session.createdAt.toISOString(),
      last_active: session.lastActive.toISOString(),
      state: { current: session.currentState ?? deps.settings.initialState, transitions: session.transitions },
      history_hash: session.historyHash,
      snapshot: session.snapshot,
    },
    transcript: transcript.map(transcriptEntry),
    transitions: transitions.map(transitionEntry),
    long_term_memories: memories.map((entry) => ({ id: entry.id, content: entry.content, created_at: entry.createdAt.toISOString() })),
  };
  const folder = resolve(deps.settings.exportDir);
  await mkdir(folder, { recursive: true });
  const file = join(folder, exportFileName(session.sessionId, exportedAt));
  await writeFile(file, `${JSON.stringify(body, null, 2)}\n`, { encoding: 'utf8', flag: 'wx', mode: 0o600 });
  return file;
}

/** Most characters of a session id an export file's name shows; a hash of the whole id keeps names apart. */
const EXPORT_NAME_ID_CHARS = 100;

/**
 * The file name of a session's export: the id percent-encoded (so that it can never leave the
 * folder or name a hidden file), cut to fit any file system's 255-byte names whatever the id,
 * then a hash of the whole id and the time.
 */
export function exportFileName(sessionId: string, exportedAt: Date): string {
  let shown = '';
  for (const character of sessionId) {
    const encoded = encodeURIComponent(character);
    if (shown.length + encoded.length > EXPORT_NAME_ID_CHARS) break;
    shown += encoded;
  }
  const idHash = createHash('sha256').update(sessionId).digest('hex').slice(0, 16);
  const stamp = exportedAt.toISOString().replace(/[:.]/g, '-');
  return `${shown.replace(/^\./, '%2E')}-${idHash}-${stamp}.json`;
}

/** Every row of a log read page by page (a page never holds the whole of a long one). */
async function readWhole<T extends { id: number }>(read: (page: { afterId?: number; limit: number }) => Promise<T[]>): Promise<T[]> {
  const rows: T[] = [];
  for (let afterId: number | undefined; ; ) {
    const page = await read({ limit: EXPORT_PAGE, ...(afterId !== undefined ? { afterId } : {}) });
    rows.push(...page);
    if (page.length < EXPORT_PAGE) return rows;
    afterId = page.at(-1)!.id;
  }
}

/** The list answer from up to `limit + 1` rows: the extra row only tells that more follow. */
function logPage<R extends { id: number }, T>(rows: R[], limit: number, toEntry: (row: R) => T): LogPage<T> {
  const page = rows.slice(0, limit);
  const hasMore = rows.length > limit;
  return { object: 'list', data: page.map(toEntry), has_more: hasMore, next_after: hasMore ? page.at(-1)!.id : null };
}

function transitionEntry(transition: StoredTransition): TransitionEntry {
  return { id: transition.id, at: transition.at.toISOString(), from: transition.from, to: transition.to, reason: transition.reason };
}

function transcriptEntry(record: ConversationRecord): TranscriptEntry {
  return { id: record.id, role: record.role, content: record.message, created_at: record.createdAt.toISOString() };
}

function deletionBody(id: string, exported: boolean, location: string | null, deletedAt: Date): AgentDeletion {
  return { id, object: 'agent.deleted', status: 'deleted', memory_exported: exported, export_location: location, deleted_at: deletedAt.toISOString() };
}

function parseDeleteBody(body: unknown): { preserveMemory: boolean; exportData: boolean } {
  if (body === undefined || body === null) return { preserveMemory: false, exportData: false };
  if (typeof body !== 'object' || Array.isArray(body)) throw new ServiceError('INVALID_REQUEST', 'The body must be a JSON object.');
  const record = body as Record<string, unknown>;
  const flag = (name: string): boolean => {
    const value = record[name];
    if (value === undefined || value === null) return false;
    if (typeof value !== 'boolean') throw new ServiceError('INVALID_REQUEST', `${name} must be a boolean`, { param: name });
    return value;
  };
  return { preserveMemory: flag('preserve_memory'), exportData: flag('export_data') };
}

/** `limit` and `after` of a log page: `after` is an entry id (the previous page's `next_after`). */
function parseLogPage(req: Request): { limit: number; afterId?: number } {
  const limit = listLimit(req);
  const raw = singleQuery(req, 'after');
  if (raw === undefined) return { limit };
  const afterId = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(afterId)) {
    throw new ServiceError('INVALID_REQUEST', 'after must be an entry id (the next_after of an earlier page)', { param: 'after' });
  }
  return { limit, afterId };
}

/** The `after` cursor: the last listed agent's last activity (µs since the epoch) and id, as `<µs>:<id>` in base64url. */
function parseCursor(req: Request): SessionCursor | undefined {
  const raw = singleQuery(req, 'after');
  if (raw === undefined) return undefined;
  const match = /^[\w-]+$/.test(raw) ? /^(\d{1,19}):(.+)$/s.exec(Buffer.from(raw, 'base64url').toString('utf8')) : null;
  // The id must be one a session can have: a NUL in it would reach PostgreSQL, which refuses it.
  if (!match || BigInt(match[1]!) > MAX_CURSOR_MICROS || !isValidIdentifier(match[2]!)) {
    throw new ServiceError('INVALID_REQUEST', 'after must be a next_cursor value from an earlier page', { param: 'after' });
  }
  return { lastActiveMicros: match[1]!, sessionId: match[2]! };
}

function encodeCursor(cursor: SessionCursor): string {
  return Buffer.from(`${cursor.lastActiveMicros}:${cursor.sessionId}`, 'utf8').toString('base64url');
}

function notFound(agentId: string): ServiceError {
  return new ServiceError('NOT_FOUND', `No agent found with id '${agentId}'.`, { param: 'agent_id' });
}
