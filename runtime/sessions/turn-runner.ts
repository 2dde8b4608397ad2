import type { AgentReply, CallLlmInput, RunToolsInput, ToolResult } from '../../machines/index.js';
import type { ChatMessage, GenerationParams, ToolCall, ToolDefinition } from '../chat-types.js';
import type { LlmClient, ToolCallDelta } from '../llm/llm-client.js';
import type { LongTermMemory } from '../memory/long-term-memory.js';
import type { EventBus } from '../observability/event-bus.js';
import type { TransitionRecord } from '../ports.js';
import { isServiceError, ServiceError } from '../service-error.js';
import type { ToolCallResult, ToolRunner } from '../tools/tool-runner.js';
import type { ActorCache, SessionActor } from './actor-cache.js';
import { foldHistoryHash, textOf, toolCallTurn, toTurn, type Turn } from './conversation-history.js';
import type { SessionLeases } from './session-leases.js';
import { buildContext } from './prompt-assembly.js';
import type { TurnStore } from './turn-store.js';
import {
  FAILED_REPLY_ROLE,
  LLM_FAILURE_PREFIX,
  type SupervisorSettings,
  type TurnHandlers,
  type TurnOutcome,
  type TurnPlan,
  type TurnRequest,
  type TurnStep,
} from './turn-types.js';

/** What running turns needs. */
export type TurnRunnerDeps = {
  llm: LlmClient;
  tools: ToolRunner;
  events: EventBus;
  store: TurnStore;
  settings: SupervisorSettings;
  memory?: LongTermMemory;
  leases?: SessionLeases;
};

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
  /** The results of the service's own tool calls, by call id. */
  toolResults: Map<string, ToolCallResult>;
};

/** Between the texts of the LLM rounds of one turn (before and after tool calls). */
const ROUND_SEPARATOR = '\n\n';

/**
 * Runs one planned turn on the session's actor: stores the user's turns, drives the actor
 * (the LLM calls and tool calls its states invoke come back here), answers, and stores how
 * the turn ended with the actor's snapshot.
 */
export class TurnRunner {
  private readonly activeTurns = new Map<string, ActiveTurn>();
  private cache!: ActorCache;

  constructor(private readonly deps: TurnRunnerDeps) {}

  /** The cache whose actors the turns run on (it is built with this runner's callbacks). */
  useCache(cache: ActorCache): void {
    this.cache = cache;
  }

  /** Turns running now. */
  get running(): number {
    return this.activeTurns.size;
  }

  isBusy(sessionId: string): boolean {
    return this.activeTurns.has(sessionId);
  }

  /** Records a transition of a session's actor in its running turn's log. */
  logTransition(sessionId: string, transition: TransitionRecord): void {
    this.activeTurns.get(sessionId)?.transitionLog.push(transition);
  }

  async run(plan: TurnPlan, request: TurnRequest, clientSystem: ChatMessage[], handlers: TurnHandlers): Promise<TurnOutcome> {
    const { session } = plan;
    const { sessionId } = session;
    const { store, settings } = this.deps;
    const started = performance.now();
    try {
      await store.persistBeforeAnswer(sessionId, plan.toStore, request.userId);
    } catch (error) {
      // The actor may be ahead of storage now: the client's retry restores the session from it.
      this.cache.distrust(sessionId);
      throw error;
    }
    const lastUserText = plan.hashed.filter((turn) => turn.role === 'user').at(-1)?.content ?? '';
    const memories = this.deps.memory && lastUserText ? await this.deps.memory.recall(request.userId, lastUserText) : [];
    const messages = buildContext({
      systemPrompt: settings.systemPrompt,
      toolsDescription: this.deps.tools.describe(),
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
      toolResults: new Map(),
    };
    this.activeTurns.set(sessionId, turn);
    try {
      const { actor, startsTurn } = this.cache.actorFor(session, request.userId, messages, plan.generation);
      const snapshot = await drive(actor, startsTurn ? null : messages, handlers.signal);
      const { failure, reason } = snapshot.context;
      const cancelled = reason === 'cancelled';
      const failsAsError = failure !== null && settings.failureMode === 'http';
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
      const ended = [...activity, ...replyTurns];
      const response = answered ? request.responseRecord?.({ ...outcome, historyHash: progress.historyHash }) : undefined;
      await store.persistEnd(sessionId, ended, request.userId, progress, fence, response);
      const recent = plan.recent && [...plan.recent, ...plan.toStore, ...ended].slice(-settings.shortTermTurns);
      this.cache.remember(sessionId, { ...session, ...progress, lastActive: new Date() }, recent);
      if (turn.authError) throw turn.authError;
      if (failsAsError) {
        throw new ServiceError('UPSTREAM_UNAVAILABLE', `${LLM_FAILURE_PREFIX.slice('Error: '.length)}${failure.message}`, {
          headers: { 'Retry-After': '1' },
        });
      }
      if (this.deps.memory && answered && !failure) {
        const exchange = { userId: request.userId, sessionId, user: lastUserText, assistant: outcome.content };
        const memory = this.deps.memory;
        void store.after(sessionId, 'consolidate long-term memory', () => memory.consolidate(exchange)).catch(() => undefined);
      }
      this.deps.events.emit('turn:completed', {
        sessionId,
        userId: request.userId,
        durationMs: performance.now() - started,
        outcome: cancelled ? 'cancelled' : failure ? 'llm_error' : 'ok',
      });
      return { ...outcome, historyHash: progress.historyHash };
    } catch (error) {
      // Which of the turn's writes committed is not known here: the next turn reads its last turns.
      this.cache.forgetRecent(sessionId);
      throw error;
    } finally {
      this.activeTurns.delete(sessionId);
    }
  }

  /** The session actors' `callLlm`: one LLM call of the running turn, streamed to its client. */
  async callLlm(input: CallLlmInput, signal: AbortSignal): Promise<AgentReply> {
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
          tools: [...this.deps.tools.definitions(state.tools), ...turn.clientTools],
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

  /** The session actors' `runTools`: the running turn's tool calls, with heartbeats to a quiet stream. */
  async runTools(input: RunToolsInput, signal: AbortSignal): Promise<ToolResult[]> {
    const turn = this.activeTurns.get(input.sessionId);
    if (!turn) throw new Error(`no turn is running for session ${input.sessionId}`);
    const scope = { userId: turn.userId, sessionId: input.sessionId, signal };
    const onHeartbeat = turn.handlers.onHeartbeat;
    const heartbeat = onHeartbeat ? setInterval(onHeartbeat, this.deps.settings.heartbeatMs) : undefined;
    const onActivity = turn.handlers.onToolActivity;
    const run = async (call: ToolCall) => {
      onActivity?.({ phase: 'started', call });
      const result = await this.deps.tools.call(call, scope);
      turn.toolResults.set(call.id, result);
      onActivity?.({ phase: 'finished', call, result });
      return result;
    };
    try {
      return await Promise.all(input.toolCalls.map(run));
    } catch (error) {
      if (isServiceError(error) && error.code === 'TOOL_AUTH_REQUIRED') turn.authError = error;
      throw error;
    } finally {
      clearInterval(heartbeat);
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
  ): Omit<TurnOutcome, 'historyHash'> {
    const streaming = Boolean(turn.handlers.onContent);
    const texts = produced.filter((message) => message.role === 'assistant').map(textOf).filter((text) => text !== '');
    const steps = stepsOf(produced, turn.toolResults);
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
        steps,
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
      steps,
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
}

/**
 * Runs the turn on the actor and waits until it rests in a user state again. `messages` is
 * null when the actor is new and its initial agent state starts the turn from its input.
 */
function drive(actor: SessionActor, messages: ChatMessage[] | null, signal: AbortSignal) {
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
 * The actor's persisted snapshot at rest, without the finished turn's working messages.
 * `unanswered` marks a turn that ended without a reply (cancelled, or a tool needed an account), so that
 * the same request sent again does not store its messages twice.
 */
function restingSnapshot(actor: SessionActor, unanswered: boolean): unknown {
  const persisted = actor.getPersistedSnapshot() as { context?: Record<string, unknown> };
  return { ...persisted, context: { ...persisted.context, messages: [] }, unanswered };
}

/**
 * The tool activity of a turn as stored turns: each call (`tool_call`, its id, name and
 * arguments) and each result (`tool`). They are kept in the transcript but, like every role
 * but system, user and assistant, never enter a context.
 */
function toolTurns(produced: ChatMessage[], clientCalls: ToolCall[]): Turn[] {
  const turns: Turn[] = [];
  for (const message of produced) {
    if (message.role === 'assistant' && message.tool_calls) {
      for (const call of message.tool_calls) if (call.type === 'function') turns.push(toolCallTurn(call));
    } else if (message.role === 'tool') {
      turns.push(toTurn(message));
    }
  }
  return [...turns, ...clientCalls.map(toolCallTurn)];
}

/**
 * A turn's steps from the messages its LLM rounds produced: each round's text (after the
 * first, led by the round separator, as it was streamed) and each of its calls of the
 * service's tools with the result. A call with no result (the turn stopped first) is left out.
 */
function stepsOf(produced: ChatMessage[], results: ReadonlyMap<string, ToolCallResult>): TurnStep[] {
  const steps: TurnStep[] = [];
  let hasText = false;
  for (const message of produced) {
    if (message.role !== 'assistant') continue;
    const text = textOf(message);
    if (text !== '') {
      steps.push({ type: 'text', text: hasText ? `${ROUND_SEPARATOR}${text}` : text });
      hasText = true;
    }
    for (const call of message.tool_calls ?? []) {
      const result = results.get(call.id);
      if (call.type === 'function' && result) steps.push({ type: 'tool', call, result });
    }
  }
  return steps;
}

/** Adds a state's own prompt to the system prompt for the call made in that state. */
function withStatePrompt(messages: ChatMessage[], prompt: string | undefined): ChatMessage[] {
  if (!prompt) return messages;
  const [first, ...rest] = messages;
  if (first?.role !== 'system') return [{ role: 'system', content: prompt }, ...messages];
  return [{ role: 'system', content: `${textOf(first)}\n\n${prompt}` }, ...rest];
}
