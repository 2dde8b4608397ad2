import { fromPromise, type InspectionEvent } from 'xstate';
import { createSessionMachine, type AgentReply, type CallLlmInput, type RunToolsInput, type SessionMachine, type ToolResult } from '../../machines/index.js';
import type { StateGraph } from '../../machines/index.js';
import { abortable } from '../abortable.js';
import type { LlmClient } from '../llm/llm-client.js';
import type { LongTermMemory } from '../memory/long-term-memory.js';
import type { EventBus } from '../observability/event-bus.js';
import type { CallLog } from '../observability/call-log.js';
import type { Tracing } from '../observability/tracing.js';
import type { ChatMessage } from '../chat-types.js';
import type { ConversationStore, SessionStore, TurnStepStore } from '../ports.js';
import { ServiceError } from '../service-error.js';
import { notPending } from '../tools/tool-approvals.js';
import { NO_TOOLS, type ToolRunner } from '../tools/tool-runner.js';
import { ActorCache, type CachedResponseEnd } from './actor-cache.js';
import { historyHashOf } from './conversation-history.js';
import type { DurableWriter } from './durable-writer.js';
import { newSessionId } from './session-ids.js';
import type { SessionLeases } from './session-leases.js';
import { createSessionRegistry, type SessionRegistry } from './session-registry.js';
import { abandonedTurnOf, conversationOf, findSession, hasUnansweredTurn, planTurn, type PlanSources } from './turn-plan.js';
import { TurnJournal, type TurnSettings } from './turn-journal.js';
import { TurnRunner } from './turn-runner.js';
import { TurnStore } from './turn-store.js';
import { FAILED_REPLY_ROLE, type SupervisorSettings, type TurnHandlers, type TurnOutcome, type TurnPlan, type TurnRequest } from './turn-types.js';
import { timedStage } from '../observability/turn-stages.js';
import type { TokenBudgets } from '../usage/token-budgets.js';

export { FAILED_REPLY_ROLE, LLM_FAILURE_PREFIX, PRIVATE_STEP_ROLE, REASONING_ROLE } from './turn-types.js';
export type { SupervisorSettings, ToolActivity, TurnHandlers, TurnOutcome, TurnRequest, TurnStep } from './turn-types.js';

/** What the supervisor is built from. */
export type SupervisorDeps = {
  graph: StateGraph;
  llm: LlmClient;
  conversations: ConversationStore;
  sessions: SessionStore;
  /** Where turns' steps are stored as they complete, for a later attempt to continue from (see TurnJournal). */
  steps?: TurnStepStore;
  writer: DurableWriter;
  events: EventBus;
  settings: SupervisorSettings;
  tools?: ToolRunner;
  memory?: LongTermMemory;
  newSessionId?: () => string;
  /** Leases that keep turns of a session one at a time across processes (PostgreSQL); none: this process is alone. */
  leases?: SessionLeases;
  /** Where the turns' LLM and tool calls are recorded. */
  calls?: CallLog;
  /** Receives every session actor's inspection events (the XState inspector). */
  inspect?: (event: InspectionEvent) => void;
  /** Where the spans of turns and their calls go (tracing on). */
  tracing?: Tracing;
  /** The users' token budgets, checked before each LLM call of a turn; none: no budget is set. */
  budgets?: TokenBudgets;
};

/**
 * Spawns one actor per session from the state graph and runs one turn at a time per
 * session. A turn: find the session, hold it, plan what to store and send, run it on the
 * actor. The collaborators each do one of these: `turn-plan` (which session, what to store
 * and send), `ActorCache` (the actors, their locks and leases), `TurnRunner` (one turn on an
 * actor), `TurnStore` (reads and durable writes).
 */
export class Supervisor {
  /** Live sessions and their status, for the inspector, metrics and agent endpoints. */
  readonly registry: SessionRegistry = createSessionRegistry();
  private readonly cache: ActorCache;
  private readonly store: TurnStore;
  private readonly runner: TurnRunner;
  private readonly sources: PlanSources;
  /** The tool servers' first connections are over and long-term memory is ready: turns no longer wait for them. */
  private isStarted = false;

  constructor(private readonly deps: SupervisorDeps) {
    const { settings } = deps;
    this.store = new TurnStore({
      conversations: deps.conversations,
      sessions: deps.sessions,
      steps: deps.steps,
      writer: deps.writer,
      events: deps.events,
      writeWaitMs: settings.writeWaitMs,
      onFenceLost: (sessionId) => {
        deps.leases?.lost(sessionId);
        this.distrust(sessionId);
      },
    });
    const runner = new TurnRunner({ llm: deps.llm, tools: deps.tools ?? NO_TOOLS, events: deps.events, store: this.store, settings, memory: deps.memory, leases: deps.leases, calls: deps.calls, tracing: deps.tracing, budgets: deps.budgets });
    const machine = createSessionMachine(deps.graph).provide({
      actors: {
        callLlm: fromPromise<AgentReply, CallLlmInput>(({ input, signal }) => runner.callLlm(input, signal)),
        runTools: fromPromise<ToolResult[], RunToolsInput>(({ input, signal }) => runner.runTools(input, signal)),
      },
    }) as SessionMachine;
    this.cache = new ActorCache({
      machine,
      graph: deps.graph,
      registry: this.registry,
      events: deps.events,
      settings,
      leases: deps.leases,
      inspect: deps.inspect,
      isBusy: (sessionId) => runner.isBusy(sessionId),
      onTransition: (sessionId, transition) => runner.logTransition(sessionId, transition),
    });
    runner.useCache(this.cache);
    this.runner = runner;
    this.sources = {
      cache: this.cache,
      store: this.store,
      shortTermTurns: settings.shortTermTurns,
      approvalWords: settings.approvalWords,
      newSessionId: deps.newSessionId ?? newSessionId,
    };
  }

  /** Session actors held in memory. */
  get cachedActors(): number {
    return this.cache.size;
  }

  /** Where a stored response continues without a read: see `ActorCache.responseEnd`. */
  responseEnd(responseId: string): CachedResponseEnd | undefined {
    return this.cache.responseEnd(responseId);
  }

  /** Runs one user turn through the session's actor and returns how it ended. */
  async runTurn(request: TurnRequest, handlers: TurnHandlers): Promise<TurnOutcome> {
    const conversation = conversationOf(request);
    const answers = request.approvals ?? [];
    // Only a session the request names can have requests pending: refused before any session is found or made.
    if (answers[0] && !request.sessionHint) throw notPending(answers[0]);
    await this.started(handlers.signal);
    // The resent history is hashed once: to find its session and to check it against the stored one.
    const prefixHash = conversation.prefix.length > 0 ? historyHashOf(conversation.prefix) : null;
    const found = await findSession(this.sources, request, { ...conversation, prefixHash });
    let { sessionId } = found;
    let { release, generation } = await timedStage(this.deps.events, 'session_wait', () => this.cache.hold(sessionId, handlers.signal, found.fresh));
    try {
      let plan = await timedStage(this.deps.events, 'plan', () => planTurn(this.sources, sessionId, generation, request, { ...conversation, prefixHash, fresh: found.fresh }));
      if (plan === 'fork') {
        release();
        sessionId = this.sources.newSessionId();
        ({ release, generation } = await this.cache.hold(sessionId, handlers.signal, true));
        plan = (await planTurn(this.sources, sessionId, generation, request, { ...conversation, prefixHash, forceNew: true, fresh: true })) as TurnPlan;
      }
      // A reply this process is still writing is not abandoned: planned again once the writes are in, it may still be.
      if (plan.abandoned && (await this.store.settled(sessionId))) {
        const replan = () => planTurn(this.sources, sessionId, generation, request, { ...conversation, prefixHash }) as Promise<TurnPlan>;
        plan = await replan();
        if (plan.abandoned && (await this.finishesFirst(plan.abandoned, request, conversation.system, handlers.signal))) plan = await replan();
      }
      return await this.runner.run(plan, request, conversation.system, handlers);
    } finally {
      release();
    }
  }

  /**
   * Finishes the turn a session's stored transcript ends with, left unanswered by a process
   * that died, before `next`, so that the next turn sees its whole answer: if it stored steps
   * (it made calls: their effects must reach the model), it is continued from them with the
   * settings it stored (else `next`'s). A turn that stored none had no effect: it stays
   * unanswered, and the next turn goes on after its message (a process that only lost its lease
   * may still be answering it). Returns whether it ran.
   */
  private async finishesFirst(abandoned: TurnPlan, next: TurnRequest, nextSystem: ChatMessage[], signal: AbortSignal): Promise<boolean> {
    const { stored } = await this.stepsOf(abandoned);
    if (stored.size === 0) return false;
    const settings = TurnJournal.settingsOf(stored) ?? { params: next.params, system: nextSystem };
    await this.continueAbandoned(abandoned, stored, settings, { userId: next.userId, requestId: next.requestId, traceParent: next.traceParent }, { signal });
    return true;
  }

  /** The steps the attempt of an abandoned turn stored, and the anchor it stored them under. */
  private async stepsOf(abandoned: TurnPlan): Promise<{ anchor: string; stored: Map<string, string> }> {
    const anchor = TurnJournal.anchorOf(abandoned.baseHash, abandoned.hashed);
    return { anchor, stored: await this.store.loadSteps(abandoned.session.sessionId, anchor) };
  }

  /** Continues an abandoned turn from the steps its attempt stored (`stored`, read already), with `settings`. */
  private async continueAbandoned(abandoned: TurnPlan, stored: Map<string, string>, settings: TurnSettings, by: Pick<TurnRequest, 'userId' | 'requestId' | 'traceParent'>, handlers: TurnHandlers): Promise<void> {
    const request: TurnRequest = { ...by, sessionHint: abandoned.session.sessionId, retried: true, messages: [], params: settings.params };
    await this.runner.run({ ...abandoned, steps: stored }, request, settings.system, handlers);
  }

  /**
   * Finishes the session's turn whose process died before it answered and that no request came
   * to finish (the sweep of abandoned turns found it): it is continued from its stored steps
   * with the settings it stored, as the session's next turn would continue it. Taken over
   * `maxAttempts` times already (each process that took it died too), its message is answered
   * with the reason instead. Returns what became of it.
   */
  async finishAbandoned(sessionId: string, userId: string, maxAttempts: number, signal: AbortSignal): Promise<'finished' | 'failed' | 'none'> {
    // A turn of this process is running on it (a process alone finds its own slow turns quiet).
    if (this.runner.isBusy(sessionId)) return 'none';
    await this.started(signal);
    const { release, generation } = await this.cache.hold(sessionId, signal);
    try {
      // This process holds the session (nothing of it is abandoned), or is still writing to it.
      if (this.cache.get(sessionId) || !(await this.store.settled(sessionId))) return 'none';
      const window = this.deps.settings.shortTermTurns;
      const session = await this.store.claim(sessionId, userId);
      const recent = await this.store.recentTurns(sessionId, window);
      const plan = abandonedTurnOf(session, generation, recent, window);
      const { anchor, stored } = plan ? await this.stepsOf(plan) : { anchor: '', stored: new Map<string, string>() };
      const settings = TurnJournal.settingsOf(stored);
      if (!plan || !settings) {
        // Ended unanswered in a live process since it was found, its steps wait for its retry;
        // otherwise the turn they were stored for ended after all (only their drop was lost), or
        // is not the one the transcript ends with: no sweep can finish it from them.
        if (!hasUnansweredTurn(session.snapshot)) this.store.clearSteps(sessionId);
        this.cache.evict(sessionId);
        return 'none';
      }
      const takeovers = TurnJournal.takeoversOf(stored);
      if (takeovers >= maxAttempts) {
        const reason = `Error: the service process answering this message stopped before it finished, and so did the ${takeovers} that took it over (sessions.max_turn_attempts)`;
        await this.store.persistBeforeAnswer(sessionId, [{ role: FAILED_REPLY_ROLE, content: reason }], userId);
        this.store.clearSteps(sessionId);
        this.cache.evict(sessionId);
        return 'failed';
      }
      await this.store.persistSteps(sessionId, anchor, [TurnJournal.takeoverStep(takeovers + 1)]);
      await this.continueAbandoned(plan, stored, settings, { userId }, { signal, leftAbandonedOnCancel: true });
      return 'finished';
    } finally {
      release();
    }
  }

  /**
   * Waits for what the service still starts in the background, each part within its own
   * time-out: the tool servers' first connections, so that a turn offers every tool a turn
   * later would, and the choice of long-term memory's embedder, so that it recalls. The turn
   * holds no session meanwhile. Rejects with MEMORY_UNAVAILABLE when that choice failed.
   */
  private async started(signal: AbortSignal): Promise<void> {
    if (this.isStarted) return;
    try {
      await abortable(Promise.all([this.deps.tools?.ready(), this.deps.memory?.ready()]), signal);
    } catch (error) {
      if (signal.aborted) throw new ServiceError('INVALID_REQUEST', 'the request was cancelled while the service was starting');
      throw error;
    }
    this.isStarted = true;
  }

  /** Stops a session's actor and forgets it (its stored snapshot stays); its lease goes back. */
  evict(sessionId: string): void {
    this.cache.evict(sessionId);
  }

  /**
   * Forgets what this process knows of a session another process took over (its lease
   * lapsed) or asked for: the actor is dropped now, or after the turn running on it.
   */
  distrust(sessionId: string): void {
    this.cache.distrust(sessionId);
  }

  /**
   * Ends a session for good: waits for its running turn (up to `turnWaitMs`) and its queued
   * writes, evicts its actor, then runs `end` (e.g. export, delete, mark deleted) while the
   * session stays locked, so no turn runs between the eviction and `end`. The next turn
   * reads the session row from storage and is refused once it is marked deleted.
   */
  async retire<T>(sessionId: string, end: () => Promise<T>): Promise<T> {
    const { release } = await this.cache.hold(sessionId);
    try {
      await this.store.after(sessionId, 'settle writes before ending the session', async () => undefined);
      this.cache.evict(sessionId);
      return await end();
    } finally {
      release();
    }
  }

  /** Waits up to `waitMs` for the turns still running to end, then stops every actor and the idle sweeper. */
  async stop(waitMs = 0): Promise<void> {
    const deadline = Date.now() + waitMs;
    while (this.runner.running > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    this.cache.stop();
  }
}
