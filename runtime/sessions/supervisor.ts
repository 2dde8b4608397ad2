import { randomUUID } from 'node:crypto';
import { createActor, fromPromise, type Actor, type InspectionEvent, type Snapshot } from 'xstate';
import {
  createSessionMachine,
  isRestingState,
  type AgentReply,
  type CallLlmInput,
  type RunToolsInput,
  type SessionMachine,
  type ToolResult,
} from '../../machines/index.js';
import type { StateGraph } from '../../machines/index.js';
import type { ChatMessage, GenerationParams, ToolCall, ToolDefinition, Usage } from '../chat-types.js';
import {
  EMPTY_HISTORY_HASH,
  foldHistoryHash,
  historyHashOf,
  splitConversation,
  textOf,
  toTurn,
  type ClientConversation,
  type Turn,
} from './conversation-history.js';
import type { DurableWriter } from './durable-writer.js';
import type { EventBus } from '../observability/event-bus.js';
import type { LlmClient, ToolCallDelta } from '../llm/llm-client.js';
import type { LongTermMemory } from '../memory/long-term-memory.js';
import type { ConversationStore, LeaseFence, SessionProgress, SessionRecord, SessionStore, TransitionRecord } from '../ports.js';
import { buildContext } from './prompt-assembly.js';
import { isServiceError, ServiceError } from '../service-error.js';
import type { SessionLeases } from './session-leases.js';
import { releaseOnce, SessionLocks, type Release } from './session-locks.js';
import { createSessionRegistry, type SessionRegistry } from './session-registry.js';
import { NO_TOOLS, type ToolRunner } from '../tools/tool-runner.js';

/** The prefix the specification gives a failed LLM call's reply. */
export const LLM_FAILURE_PREFIX = 'Error: An error occurred during async LLM call: ';

/**
 * The stored role of a reply that is a failure's text: kept in the transcript as the client
 * saw it, and, like every role but system, user and assistant, never placed in a context.
 */
export const FAILED_REPLY_ROLE = 'assistant_error';

/** One user turn, as the gateway hands it over. */
export type TurnRequest = {
  userId: string;
  /** The session the client named (X-Session-ID or session_id), if any. */
  sessionHint?: string;
  messages: ChatMessage[];
  params: GenerationParams;
  /** Tools the client runs itself: their calls are returned to it, not run here. */
  clientTools?: ToolDefinition[];
};

/** Where a turn's answer goes while it is produced. */
export type TurnHandlers = {
  /** Aborts the turn: the LLM request or tool call in flight is cancelled. */
  signal: AbortSignal;
  /** Called once the session is known and the user's message is stored, before any answer. */
  onSessionReady?: (sessionId: string) => void;
  /** Streams the answer: each content piece as it arrives. */
  onContent?: (piece: string) => void;
  /** Streams tool-call pieces of calls the client runs itself. */
  onToolCallDelta?: (delta: ToolCallDelta) => void;
  /** Called every `heartbeatMs` while tools run, so a quiet stream stays open. */
  onHeartbeat?: () => void;
};

/** How a turn ended. */
export type TurnOutcome = {
  sessionId: string;
  content: string;
  toolCalls: ToolCall[];
  finishReason: string;
  usage: Usage | null;
  failure: { source: 'llm' | 'tool'; message: string } | null;
  cancelled: boolean;
};

/** The supervisor's settings. */
export type SupervisorSettings = {
  systemPrompt: string;
  shortTermTurns: number;
  maxToolRounds: number;
  cacheSize: number;
  idleMs: number;
  turnWaitMs: number;
  /** How long a turn waits for a write to commit before it answers anyway (the write goes on). */
  writeWaitMs: number;
  /** Interval of heartbeats while tools run. */
  heartbeatMs: number;
  /**
   * How a failed LLM call is answered: `reply`, the specification's error text as the reply;
   * `http`, an error the client can retry (the turn stays unanswered, so a retry is not stored twice).
   */
  failureMode: 'reply' | 'http';
};

/** What the supervisor is built from. */
export type SupervisorDeps = {
  graph: StateGraph;
  llm: LlmClient;
  conversations: ConversationStore;
  sessions: SessionStore;
  writer: DurableWriter;
  events: EventBus;
  settings: SupervisorSettings;
  tools?: ToolRunner;
  memory?: LongTermMemory;
  newSessionId?: () => string;
  /** Leases that keep turns of a session one at a time across processes (PostgreSQL); none: this process is alone. */
  leases?: SessionLeases;
  /** Receives every session actor's inspection events (the XState inspector). */
  inspect?: (event: InspectionEvent) => void;
};

type SessionActor = Actor<SessionMachine>;

/**
 * A live session: its actor, its stored row as this process last wrote it, and the lease
 * generation of its last turn here (0 without leases).
 */
type CachedActor = { actor: SessionActor; session: SessionRecord; lastUsed: number; generation: number };

/** What a running turn keeps outside the actor: where its answer goes and what it gathered. */
type ActiveTurn = {
  userId: string;
  handlers: TurnHandlers;
  params: GenerationParams;
  clientTools: ToolDefinition[];
  clientToolNames: Set<string>;
  /** Tool calls for the client's own tools, returned as the answer. */
  clientToolCalls: ToolCall[];
  /** Set when a tool needs an account the user has not connected. */
  authError: ServiceError | null;
  /** Content was streamed in an earlier LLM round of this turn: the next round starts with a separator. */
  needsSeparator: boolean;
  /** The transitions the turn took, stored with its end. */
  transitionLog: TransitionRecord[];
  /** Everything streamed to the client so far, separators included. */
  streamed: string;
};

/** Between the texts of the LLM rounds of one turn (before and after tool calls). */
const ROUND_SEPARATOR = '\n\n';

/** How a resolved turn treats the client's messages. */
type TurnPlan = {
  session: SessionRecord;
  /** Messages to store before answering, in order. */
  toStore: Turn[];
  /** The dialogue placed after the system prompt and memories. */
  dialogue: ChatMessage[];
  /** The conversation hash before this turn's new turns. */
  baseHash: string;
  /** The turns that follow `baseHash` before the reply (stored now or by an earlier attempt). */
  hashed: Turn[];
  /** True when the conversation is brand new or forked (no stored turns to continue). */
  isNew: boolean;
  /** The session lease's generation this turn runs under (0 without leases). */
  generation: number;
};

/**
 * Spawns one actor per session from the state graph, keeps them in a bounded cache with
 * idle eviction, runs one turn at a time per session, and persists each actor's snapshot
 * at rest so a session continues after an eviction or a restart.
 */
export class Supervisor {
  /** Live sessions and their status, for the inspector, metrics and agent endpoints. */
  readonly registry: SessionRegistry = createSessionRegistry();
  private readonly machine: SessionMachine;
  private readonly cache = new Map<string, CachedActor>();
  private readonly activeTurns = new Map<string, ActiveTurn>();
  private readonly locks = new SessionLocks();
  private readonly tools: ToolRunner;
  private readonly newSessionId: () => string;
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly deps: SupervisorDeps) {
    this.tools = deps.tools ?? NO_TOOLS;
    this.newSessionId = deps.newSessionId ?? (() => randomUUID());
    this.machine = createSessionMachine(deps.graph).provide({
      actors: {
        callLlm: fromPromise<AgentReply, CallLlmInput>(({ input, signal }) => this.callLlm(input, signal)),
        runTools: fromPromise<ToolResult[], RunToolsInput>(({ input, signal }) => this.runTools(input, signal)),
      },
    }) as SessionMachine;
    this.sweeper = setInterval(() => this.evictIdle(), Math.min(deps.settings.idleMs, 30_000));
    this.sweeper.unref();
  }

  /** Session actors held in memory. */
  get cachedActors(): number {
    return this.cache.size;
  }

  /** Runs one user turn through the session's actor and returns how it ended. */
  async runTurn(request: TurnRequest, handlers: TurnHandlers): Promise<TurnOutcome> {
    const withTools = (request.clientTools?.length ?? 0) > 0;
    const conversation = splitConversation(request.messages, { withTools });
    const last = conversation.tail.at(-1);
    if (!last || !(last.role === 'user' || (withTools && last.role === 'tool'))) {
      const expected = withTools ? 'a user message or tool results' : 'a user message';
      throw new ServiceError('INVALID_REQUEST', `messages must end with ${expected}`, { param: 'messages' });
    }
    // The resent history is hashed once: to find its session and to check it against the stored one.
    const prefixHash = conversation.prefix.length > 0 ? historyHashOf(conversation.prefix) : null;
    let sessionId = await this.findSessionId(request, prefixHash);
    let { release, generation } = await this.hold(sessionId, handlers.signal);
    try {
      let plan = await this.plan(sessionId, generation, request, { ...conversation, prefixHash });
      if (plan === 'fork') {
        release();
        sessionId = this.newSessionId();
        ({ release, generation } = await this.hold(sessionId, handlers.signal));
        plan = (await this.plan(sessionId, generation, request, { ...conversation, prefixHash, forceNew: true })) as TurnPlan;
      }
      return await this.run(plan, request, conversation.system, handlers);
    } finally {
      release();
    }
  }

  /** Stops a session's actor and forgets it (its stored snapshot stays). */
  evict(sessionId: string): void {
    const cached = this.cache.get(sessionId);
    if (!cached) return;
    cached.actor.stop();
    this.cache.delete(sessionId);
    this.registry.trigger.remove({ sessionId });
  }

  /**
   * Forgets what this process knows of a session another process took over (its lease
   * lapsed): the actor is dropped now, or after the turn running on it.
   */
  distrust(sessionId: string): void {
    const cached = this.cache.get(sessionId);
    if (!cached) return;
    if (this.activeTurns.has(sessionId)) cached.generation = -1;
    else this.evict(sessionId);
  }

  /**
   * Ends a session for good: waits for its running turn (up to `turnWaitMs`) and its queued
   * writes, evicts its actor, then runs `end` (e.g. export, delete, mark deleted) while the
   * session stays locked, so no turn runs between the eviction and `end`. The next turn
   * reads the session row from storage and is refused once it is marked deleted.
   */
  async retire<T>(sessionId: string, end: () => Promise<T>): Promise<T> {
    const { release } = await this.hold(sessionId);
    try {
      await this.deps.writer.write(sessionId, 'settle writes before ending the session', async () => undefined);
      this.evict(sessionId);
      return await end();
    } finally {
      release();
    }
  }

  /** Waits up to `waitMs` for the turns still running to end, then stops every actor and the idle sweeper. */
  async stop(waitMs = 0): Promise<void> {
    clearInterval(this.sweeper);
    const deadline = Date.now() + waitMs;
    while (this.activeTurns.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    for (const sessionId of [...this.cache.keys()]) this.evict(sessionId);
  }

  /**
   * Holds the session for one turn: first in this process (arrival order), then, with
   * leases, across processes. An actor cached here is dropped when another process ran a
   * turn of the session since this one did (the lease generation moved by more than one):
   * the turn then starts from the stored snapshot, never from a stale one.
   */
  private async hold(sessionId: string, signal?: AbortSignal): Promise<{ release: Release; generation: number }> {
    const waitMs = this.deps.settings.turnWaitMs;
    const started = Date.now();
    const unlock = await this.locks.acquire(sessionId, waitMs, signal);
    const leases = this.deps.leases;
    if (!leases) return { release: unlock, generation: 0 };
    let lease;
    try {
      lease = await leases.acquire(sessionId, Math.max(0, waitMs - (Date.now() - started)), signal);
    } catch (error) {
      unlock();
      throw error;
    }
    const cached = this.cache.get(sessionId);
    if (cached && !lease.reused && lease.generation !== cached.generation + 1) this.evict(sessionId);
    const release = () => {
      leases.release(sessionId);
      unlock();
    };
    return { release: releaseOnce(release), generation: lease.generation };
  }

  private async findSessionId(request: TurnRequest, prefixHash: string | null): Promise<string> {
    if (request.sessionHint) return request.sessionHint;
    if (prefixHash !== null) {
      const known = await this.storage('find session by history', () => this.deps.sessions.findByHistoryHash(request.userId, prefixHash));
      if (known) return known.sessionId;
    }
    return this.newSessionId();
  }

  /**
   * Decides what the turn stores and which dialogue it sends, after the session is locked.
   * A resent history that no longer matches the stored one (an edited or regenerated turn)
   * forks: the caller moves the turn to a new session and the stored transcript is untouched.
   */
  private async plan(
    sessionId: string,
    generation: number,
    request: TurnRequest,
    conversation: ClientConversation & { prefixHash: string | null; forceNew?: boolean },
  ): Promise<TurnPlan | 'fork'> {
    // A session whose actor lives here was last written by this process: its row is known.
    const cached = this.cache.get(sessionId);
    const { created, ...session } = cached
      ? { ...cached.session, created: false }
      : await this.storage('claim session', () => this.deps.sessions.claim(sessionId, request.userId));
    if (session.userId !== request.userId) {
      throw new ServiceError('FORBIDDEN', `session ${sessionId} belongs to another user`, { param: 'session_id' });
    }
    if (session.deletedAt) {
      throw new ServiceError('GONE', `session ${sessionId} was deleted and cannot be continued`, { param: 'session_id' });
    }
    const { prefix, tail, prefixHash } = conversation;
    const tailTurns = tail.map(toTurn);
    const isNew = session.historyHash === null || conversation.forceNew === true;
    // A brand-new conversation stores the history the client sent with it; a continued one, its new turns.
    const turns = isNew && prefixHash !== null ? [...prefix.map(toTurn), ...tailTurns] : tailTurns;
    // The same request again after a turn that ended unanswered (cancelled, a tool needed an
    // account, or its process died: then this process has no actor of the session, and a first
    // turn left no history hash): its messages are stored already, and a stored tail equal to
    // the request's can only be that. A row this request created holds nothing yet.
    const mayRetry = conversation.forceNew !== true && !created && (hasUnansweredTurn(session.snapshot) || !cached);
    const isRetry = mayRetry && (await this.storage('read the last turns', () => this.isStoredTail(sessionId, turns)));
    const toStore = isRetry ? [] : turns;
    if (prefixHash === null) {
      const history = isNew ? [] : await this.recentDialogue(sessionId);
      const dialogue = isRetry && !isNew ? history : [...history, ...tail];
      return { session, isNew, generation, toStore, dialogue, baseHash: session.historyHash ?? EMPTY_HISTORY_HASH, hashed: tailTurns };
    }
    if (isNew) return { session, isNew, generation, toStore, dialogue: withoutFailedReplies([...prefix, ...tail]), baseHash: EMPTY_HISTORY_HASH, hashed: turns };
    if (prefixHash !== session.historyHash) return 'fork';
    return { session, isNew, generation, toStore, dialogue: withoutFailedReplies([...prefix, ...tail]), baseHash: prefixHash, hashed: tailTurns };
  }

  private async recentDialogue(sessionId: string): Promise<ChatMessage[]> {
    const records = await this.storage('read recent turns', () =>
      this.deps.conversations.recent(sessionId, this.deps.settings.shortTermTurns),
    );
    return records
      .filter((record) => record.role === 'user' || record.role === 'assistant' || record.role === 'system')
      .map((record) => ({ role: record.role, content: record.message }) as ChatMessage);
  }

  private async run(plan: TurnPlan, request: TurnRequest, clientSystem: ChatMessage[], handlers: TurnHandlers): Promise<TurnOutcome> {
    const { session } = plan;
    const { sessionId } = session;
    const started = performance.now();
    await this.persist(sessionId, 'store user turn', plan.toStore, request.userId);
    const lastUserText = plan.hashed.filter((turn) => turn.role === 'user').at(-1)?.content ?? '';
    const memories = this.deps.memory && lastUserText ? await this.deps.memory.recall(request.userId, lastUserText) : [];
    const messages = buildContext({
      systemPrompt: this.deps.settings.systemPrompt,
      toolsDescription: this.tools.describe(),
      memories,
      clientSystem,
      dialogue: plan.dialogue,
    });

    if (plan.isNew) this.deps.events.emit('session:created', { sessionId, userId: request.userId });
    handlers.onSessionReady?.(sessionId);
    const clientTools = request.clientTools ?? [];
    const turn: ActiveTurn = {
      userId: request.userId,
      handlers,
      params: request.params,
      clientTools,
      clientToolNames: new Set(clientTools.map((tool) => (tool.type === 'function' ? tool.function.name : ''))),
      clientToolCalls: [],
      authError: null,
      needsSeparator: false,
      transitionLog: [],
      streamed: '',
    };
    this.activeTurns.set(sessionId, turn);
    try {
      const { actor, startsTurn } = this.actorFor(session, request.userId, messages, plan.generation);
      const snapshot = await this.drive(actor, startsTurn ? null : messages, handlers.signal);
      const { failure, reason } = snapshot.context;
      const cancelled = reason === 'cancelled';
      const failsAsError = failure !== null && this.deps.settings.failureMode === 'http';
      const produced = snapshot.context.messages.slice(messages.length);
      const outcome = this.outcomeOf(sessionId, snapshot.context.reply, produced, turn, failure, cancelled);
      const answered = !cancelled && !turn.authError && !failsAsError;
      const reply: Turn = { role: 'assistant', content: outcome.content };
      // A failure's text is stored marked, so later contexts leave it out.
      const replyTurns: Turn[] = answered ? [failure ? { ...reply, role: FAILED_REPLY_ROLE } : reply] : [];
      // A turn stopped for a missing account stores nothing more: its tool call never ran.
      const activity = turn.authError ? [] : toolTurns(produced, turn.clientToolCalls);
      const progress = {
        snapshot: restingSnapshot(actor, !answered),
        currentState: String(snapshot.value),
        transitions: snapshot.context.transitions,
        transitionLog: turn.transitionLog,
        // An unanswered turn leaves the hash where it was, so the same request can be sent again.
        // The client holds every reply as an assistant turn, the failure's text included.
        historyHash: answered ? foldHistoryHash(plan.baseHash, [...plan.hashed, reply]) : plan.baseHash,
      };
      const fence = this.deps.leases ? { holder: this.deps.leases.holder, generation: plan.generation } : undefined;
      await this.persist(sessionId, 'store the reply and the session snapshot', [...activity, ...replyTurns], request.userId, progress, fence);
      this.remember(sessionId, { ...session, ...progress, lastActive: new Date() });
      if (turn.authError) throw turn.authError;
      if (failsAsError) {
        throw new ServiceError('UPSTREAM_UNAVAILABLE', `${LLM_FAILURE_PREFIX.slice('Error: '.length)}${failure.message}`, {
          headers: { 'Retry-After': '1' },
        });
      }
      if (this.deps.memory && answered && !failure) {
        const exchange = { userId: request.userId, sessionId, user: lastUserText, assistant: outcome.content };
        const memory = this.deps.memory;
        void this.deps.writer.write(sessionId, 'consolidate long-term memory', () => memory.consolidate(exchange)).catch(() => undefined);
      }
      this.deps.events.emit('turn:completed', {
        sessionId,
        userId: request.userId,
        durationMs: performance.now() - started,
        outcome: cancelled ? 'cancelled' : failure ? 'llm_error' : 'ok',
      });
      return outcome;
    } finally {
      this.activeTurns.delete(sessionId);
    }
  }

  /**
   * The answer of a finished turn. Its text is every LLM round's text joined (what a
   * streaming client saw); a failed LLM call gives the specification's error text instead.
   */
  private outcomeOf(
    sessionId: string,
    reply: AgentReply | null,
    produced: ChatMessage[],
    turn: ActiveTurn,
    failure: TurnOutcome['failure'],
    cancelled: boolean,
  ): TurnOutcome {
    const streaming = Boolean(turn.handlers.onContent);
    const texts = produced.filter((message) => message.role === 'assistant').map(textOf).filter((text) => text !== '');
    if (failure) {
      // A streaming client saw the failed round's partial text, then the error: that is the reply.
      // (With failures answered as HTTP errors, the gateway ends the stream with an error event.)
      if (streaming && this.deps.settings.failureMode === 'reply') this.stream(turn, `${LLM_FAILURE_PREFIX}${failure.message}`);
      return {
        sessionId,
        content: streaming ? turn.streamed : [...texts, `${LLM_FAILURE_PREFIX}${failure.message}`].join(ROUND_SEPARATOR),
        toolCalls: [],
        finishReason: 'stop',
        usage: null,
        failure,
        cancelled,
      };
    }
    const toolCalls = turn.clientToolCalls;
    return {
      sessionId,
      content: texts.join(ROUND_SEPARATOR),
      toolCalls,
      finishReason: toolCalls.length > 0 ? 'tool_calls' : cancelled ? 'stop' : (reply?.finishReason ?? 'stop'),
      usage: reply?.usage ?? null,
      failure: null,
      cancelled,
    };
  }

  /** Streams a piece of the answer, after a separator when an earlier round already streamed text. */
  private stream(turn: ActiveTurn, piece: string): void {
    if (turn.needsSeparator) {
      turn.needsSeparator = false;
      turn.streamed += ROUND_SEPARATOR;
      turn.handlers.onContent?.(ROUND_SEPARATOR);
    }
    turn.streamed += piece;
    turn.handlers.onContent?.(piece);
  }

  /**
   * Runs the turn on the actor and waits until it rests in a user state again. `messages` is
   * null when the actor is new and its initial agent state starts the turn from its input.
   */
  private drive(actor: SessionActor, messages: ChatMessage[] | null, signal: AbortSignal) {
    return new Promise<ReturnType<SessionActor['getSnapshot']>>((resolve, reject) => {
      const onAbort = () => actor.send({ type: 'turn.cancel' });
      const completed = actor.on('turn.completed', () => {
        cleanup();
        resolve(actor.getSnapshot());
      });
      const errors = actor.subscribe({
        error: (error) => {
          cleanup();
          reject(error);
        },
      });
      const cleanup = () => {
        signal.removeEventListener('abort', onAbort);
        completed.unsubscribe();
        errors.unsubscribe();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      actor.start(); // no-op when it runs already
      if (messages) actor.send({ type: 'user.message', messages });
      if (signal.aborted) onAbort();
    });
  }

  /**
   * The session's actor: from the cache, restored from its stored snapshot, or new. A new
   * actor whose graph starts in an agent state takes the turn's messages as input and
   * `startsTurn` is true; every other actor is sent the turn as a `user.message`.
   */
  private actorFor(
    session: SessionRecord,
    userId: string,
    messages: ChatMessage[],
    generation: number,
  ): { actor: SessionActor; startsTurn: boolean } {
    const cached = this.cache.get(session.sessionId);
    if (cached) {
      this.cache.delete(session.sessionId);
      cached.lastUsed = Date.now();
      cached.generation = generation;
      this.cache.set(session.sessionId, cached);
      return { actor: cached.actor, startsTurn: false };
    }
    const startsTurn = !session.snapshot && !isRestingState(this.deps.graph, this.deps.graph.initial);
    const input = { ...this.inputFor(session.sessionId), ...(startsTurn ? { messages } : {}) };
    const inspect = this.deps.inspect;
    const actor = session.snapshot
      ? createActor(this.machine, { snapshot: session.snapshot as Snapshot<unknown>, input, inspect })
      : createActor(this.machine, { input, inspect });
    this.observe(actor, session.sessionId, userId);
    this.cache.set(session.sessionId, { actor, session, lastUsed: Date.now(), generation });
    this.evictOverflow();
    return { actor, startsTurn };
  }

  /** Keeps the row a finished turn wrote beside the cached actor. */
  private remember(sessionId: string, session: SessionRecord): void {
    const cached = this.cache.get(sessionId);
    if (cached) cached.session = session;
  }

  private inputFor(sessionId: string) {
    return { sessionId, maxToolRounds: this.deps.settings.maxToolRounds };
  }

  /** Reports every transition of an actor on the event bus and in the registry. */
  private observe(actor: SessionActor, sessionId: string, userId: string): void {
    let previous: string | null = null;
    actor.subscribe((snapshot) => {
      const state = String(snapshot.value);
      const resting = isRestingState(this.deps.graph, state);
      if (previous !== null && previous !== state) {
        const reason = snapshot.context.reason;
        this.activeTurns.get(sessionId)?.transitionLog.push({ at: new Date(), from: previous, to: state, reason: reason ?? null });
        this.deps.events.emit('session:state_changed', { sessionId, userId, from: previous, to: state, reason });
      }
      previous = state;
      this.registry.trigger.upsert({
        session: {
          sessionId,
          userId,
          state,
          status: resting ? 'waiting_for_input' : 'processing',
          transitions: snapshot.context.transitions,
          lastActive: Date.now(),
        },
      });
    });
  }

  private async callLlm(input: CallLlmInput, signal: AbortSignal): Promise<AgentReply> {
    const turn = this.activeTurns.get(input.sessionId);
    if (!turn) throw new Error(`no turn is running for session ${input.sessionId}`);
    const state = input.stateConfig;
    const started = performance.now();
    const streaming = Boolean(turn.handlers.onContent);
    const clientCallIndexes = new Set<number>();
    // The client's calls reach it only once the round shows they are all it has to run.
    const clientDeltas: ToolCallDelta[] = [];
    let streamedText = false;
    try {
      const reply = await this.deps.llm.generate(
        {
          model: state.model ?? turn.params.model,
          temperature: state.temperature ?? turn.params.temperature,
          max_tokens: state.max_tokens ?? turn.params.max_tokens,
          messages: withStatePrompt(input.messages, state.prompt),
          tools: [...this.tools.definitions(state.tools), ...turn.clientTools],
        },
        {
          signal,
          onContent: streaming
            ? (piece) => {
                streamedText = true;
                this.stream(turn, piece);
              }
            : undefined,
          onToolCallDelta:
            streaming && turn.handlers.onToolCallDelta
              ? (delta) => {
                  if (delta.function?.name && turn.clientToolNames.has(delta.function.name)) clientCallIndexes.add(delta.index);
                  if (clientCallIndexes.has(delta.index)) clientDeltas.push(delta);
                }
              : undefined,
        },
      );
      if (streamedText) turn.needsSeparator = true;
      this.deps.events.emit('llm:reply', {
        sessionId: input.sessionId,
        durationMs: performance.now() - started,
        finishReason: reply.finishReason,
        toolCalls: reply.toolCalls.length,
      });
      const forClient = reply.toolCalls.filter((call) => turn.clientToolNames.has(call.function.name));
      if (forClient.length === 0) return reply;
      if (forClient.length < reply.toolCalls.length) {
        // Calls of both: the service's tools run first, and the model, given their results,
        // asks for the client's again (a client can only answer a reply of its own calls).
        return { ...reply, toolCalls: reply.toolCalls.filter((call) => !turn.clientToolNames.has(call.function.name)) };
      }
      // The client runs these itself: the turn ends here and returns them.
      for (const delta of clientDeltas) turn.handlers.onToolCallDelta?.(delta);
      turn.clientToolCalls = forClient;
      return { ...reply, toolCalls: [] };
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.deps.events.emit('llm:error', { sessionId: input.sessionId, userId: turn.userId, durationMs: performance.now() - started, message });
      throw error;
    }
  }

  private async runTools(input: RunToolsInput, signal: AbortSignal): Promise<ToolResult[]> {
    const turn = this.activeTurns.get(input.sessionId);
    if (!turn) throw new Error(`no turn is running for session ${input.sessionId}`);
    const scope = { userId: turn.userId, sessionId: input.sessionId, signal };
    const onHeartbeat = turn.handlers.onHeartbeat;
    const heartbeat = onHeartbeat ? setInterval(onHeartbeat, this.deps.settings.heartbeatMs) : undefined;
    try {
      return await Promise.all(input.toolCalls.map((call) => this.tools.call(call, scope)));
    } catch (error) {
      if (isServiceError(error) && error.code === 'TOOL_AUTH_REQUIRED') turn.authError = error;
      throw error;
    } finally {
      clearInterval(heartbeat);
    }
  }

  /**
   * Stores turns (and, at the end of a turn, the session's progress in the same statement)
   * through the durable writer. The turn waits for the commit up to
   * `writeWaitMs`; past that it goes on answering while the write keeps retrying in order.
   */
  private async persist(sessionId: string, operation: string, turns: Turn[], userId: string, progress?: SessionProgress, fence?: LeaseFence): Promise<void> {
    if (turns.length === 0 && !progress) return;
    const records = turns.map((turn) => ({ userId, sessionId, role: turn.role, message: turn.content }));
    let attempts = 0;
    const write = this.deps.writer.write(sessionId, operation, async () => {
      attempts += 1;
      // A retry after a lost acknowledgement must not store the turns twice.
      const pending = attempts > 1 && turns.length > 0 && (await this.isStoredTail(sessionId, turns)) ? [] : records;
      if (progress) {
        const stored = await this.deps.sessions.completeTurn(sessionId, pending, progress, fence);
        // Another process took the session while this write waited (its lease lapsed in a
        // database outage): its snapshot stands, and the actor here is stale.
        if (!stored && fence) {
          this.deps.leases?.lost(sessionId);
          this.distrust(sessionId);
        }
      } else if (pending.length > 0) await this.deps.conversations.append(pending);
    });
    if (turns.length > 0) {
      write.then(
        () => this.deps.events.emit('memory:written', { sessionId, userId, entries: turns.length, kind: 'conversation' }),
        () => undefined,
      );
    }
    await this.waitForWrite(write);
  }

  /**
   * True when the session's last records are `turns`. Turns of a session alternate and are
   * written one turn at a time, so an identical tail can only be an earlier attempt's commit.
   */
  private async isStoredTail(sessionId: string, turns: Turn[]): Promise<boolean> {
    const tail = await this.deps.conversations.recent(sessionId, turns.length);
    return tail.length === turns.length && tail.every((record, index) => record.role === turns[index]!.role && record.message === turns[index]!.content);
  }

  /**
   * Waits for a write to commit, at most `writeWaitMs`; a write still retrying goes on alone.
   * A write that failed for good (the database refused its data) fails the turn: it is never
   * answered as if it were stored.
   */
  private async waitForWrite(write: Promise<unknown>): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.deps.settings.writeWaitMs);
    });
    try {
      await Promise.race([write, deadline]);
    } catch (error) {
      throw new ServiceError('INTERNAL', 'The turn could not be stored, so it was not answered.', { cause: error });
    } finally {
      clearTimeout(timer);
    }
  }

  /** Runs a read that the turn cannot go on without; a database failure becomes a 503. */
  private async storage<T>(operation: string, read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (error) {
      if (error instanceof ServiceError) throw error;
      this.deps.events.emit('storage:error', { operation, error: error as Error, attempt: 1, willRetry: false });
      throw new ServiceError('DATABASE_UNAVAILABLE', 'the database is unavailable; try again shortly', {
        cause: error,
        headers: { 'Retry-After': '1' },
      });
    }
  }

  private evictOverflow(): void {
    for (const [sessionId] of this.cache) {
      if (this.cache.size <= this.deps.settings.cacheSize) return;
      if (!this.activeTurns.has(sessionId)) this.evict(sessionId);
    }
  }

  private evictIdle(): void {
    const cutoff = Date.now() - this.deps.settings.idleMs;
    for (const [sessionId, cached] of this.cache) {
      if (cached.lastUsed > cutoff) return;
      if (!this.activeTurns.has(sessionId)) this.evict(sessionId);
    }
  }
}

/**
 * The actor's persisted snapshot at rest, without the finished turn's working messages.
 * `unanswered` marks a turn that ended without a reply (cancelled, or a tool needed an account), so that
 * the same request sent again does not store its messages twice.
 */
function restingSnapshot(actor: SessionActor, unanswered: boolean): unknown {
  const persisted = actor.getPersistedSnapshot() as { context?: Record<string, unknown> };
  return { ...persisted, context: { ...persisted.context, messages: [] }, unanswered };
}

/** True when a stored snapshot says the session's last turn ended unanswered. */
function hasUnansweredTurn(snapshot: unknown): boolean {
  return (snapshot as { unanswered?: unknown } | null)?.unanswered === true;
}

/**
 * The tool activity of a turn as stored turns: each call (`tool_call`, its id, name and
 * arguments) and each result (`tool`). They are kept in the transcript but, like every role
 * but system, user and assistant, never enter a context.
 */
function toolTurns(produced: ChatMessage[], clientCalls: ToolCall[]): Turn[] {
  const turns: Turn[] = [];
  const callTurn = (call: ToolCall): Turn => ({
    role: 'tool_call',
    content: JSON.stringify({ id: call.id, name: call.function.name, arguments: call.function.arguments }),
  });
  for (const message of produced) {
    if (message.role === 'assistant' && message.tool_calls) {
      for (const call of message.tool_calls) if (call.type === 'function') turns.push(callTurn(call));
    } else if (message.role === 'tool') {
      turns.push(toTurn(message));
    }
  }
  return [...turns, ...clientCalls.map(callTurn)];
}

/**
 * A resent history without the replies that are this service's failure texts (streamed or
 * not, they hold the specification's prefix): a failed turn never reaches a later context.
 */
function withoutFailedReplies(dialogue: ChatMessage[]): ChatMessage[] {
  return dialogue.filter((message) => message.role !== 'assistant' || !textOf(message).includes(LLM_FAILURE_PREFIX));
}

/** Adds a state's own prompt to the system prompt for the call made in that state. */
function withStatePrompt(messages: ChatMessage[], prompt: string | undefined): ChatMessage[] {
  if (!prompt) return messages;
  const [first, ...rest] = messages;
  if (first?.role !== 'system') return [{ role: 'system', content: prompt }, ...messages];
  return [{ role: 'system', content: `${textOf(first)}\n\n${prompt}` }, ...rest];
}
