import { randomUUID } from 'node:crypto';
import type { AgentReply, CallLlmInput, RunToolsInput, SessionEvent, StateApproval, ToolResult } from '../../machines/index.js';
import type { ChatMessage, GenerationParams, ToolCall, ToolDefinition, Usage } from '../chat-types.js';
import type { LlmClient, LlmRequest, ToolCallDelta } from '../llm/llm-client.js';
import type { CallLog } from '../observability/call-log.js';
import type { LongTermMemory } from '../memory/long-term-memory.js';
import type { EventBus } from '../observability/event-bus.js';
import type { Tracing, TurnSpan } from '../observability/tracing.js';
import type { NewCallRecord, SessionProgress, SessionRecord, SessionUsage, TransitionRecord } from '../ports.js';
import { isServiceError, ServiceError } from '../service-error.js';
import { approvalQuestion, denialResult, newApprovalRequestId, unknownOutcomeResult, type ApprovalDecision, type ApprovalRequest } from '../tools/tool-approvals.js';
import type { LlmReply } from '../llm/llm-client.js';
import type { ToolCallResult, ToolCallScope, ToolRunner } from '../tools/tool-runner.js';
import type { ActorCache, SessionActor } from './actor-cache.js';
import { foldHistoryHash, textOf, toolCallTurn, toTurn, type Turn } from './conversation-history.js';
import { handoffIn, stateRequiresApproval, transferTools } from './agent-handoffs.js';
import { addUsage, llmCallRecord, mergeUsage, startCall, sumUsage, toolCallRecord, usageTotal } from './call-records.js';
import { withDecidedApprovals, withPendingApprovals } from './pending-approvals.js';
import type { SessionLeases } from './session-leases.js';
import { buildContext, withStateSystem } from './prompt-assembly.js';
import { TurnJournal } from './turn-journal.js';
import { timedStage } from '../observability/turn-stages.js';
import type { TurnStore } from './turn-store.js';
import type { CallPermit, TokenBudgets } from '../usage/token-budgets.js';
import {
  FAILED_REPLY_ROLE,
  LLM_FAILURE_PREFIX,
  PRIVATE_STEP_ROLE,
  REASONING_ROLE,
  ROUND_SEPARATOR,
  type SupervisorSettings,
  type TurnHandlers,
  type TurnOutcome,
  type PlannedApprovals,
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
  /** Where the turns' LLM and tool calls are recorded (`/v1/agents/{id}/calls`). */
  calls?: CallLog;
  /** Where the spans of turns and their calls go; none: tracing is off. */
  tracing?: Tracing;
  /** The users' token budgets; none: no budget is set, and nothing is counted. */
  budgets?: TokenBudgets;
};

/** What a running turn keeps outside the actor: where its answer goes and what it gathered. */
type ActiveTurn = {
  userId: string;
  /** The id of the HTTP request the turn runs for, as its log lines name it (null when none). */
  requestId: string | null;
  /** The turn's id in its call records (`turn_` and hex). */
  turnId: string;
  /** The tokens the turn's LLM calls used, by model. */
  usage: SessionUsage;
  /** The turn's calls still to be stored (`inspect.store_calls`). */
  calls: NewCallRecord[];
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
  /** Reasoning was streamed in an earlier LLM round of this turn: the next round's starts with a separator. */
  reasoningNeedsSeparator: boolean;
  /** The transitions the turn took, stored with its end. */
  transitionLog: TransitionRecord[];
  /** Everything streamed to the client so far, separators included. */
  streamed: string;
  /**
   * For each LLM round that completed, in order, whether its text reaches the reply; a private
   * step's (an agent state handing over to another) is kept out of it (see `StateOutput`).
   */
  roundsShown: boolean[];
  /** Each completed LLM round's reasoning, in order ('' when it gave none), as `roundsShown`. */
  roundsReasoning: string[];
  /** The usage of the turn's LLM calls added up (null until one reported or was counted). */
  callsUsage: Usage | null;
  /** The tools the last LLM call offered, by name: the calls the turn's tool state may run. */
  offered: ReadonlySet<string>;
  /** The results of the service's own tool calls, by call id. */
  toolResults: Map<string, ToolCallResult>;
  /** Calls of the service's tools held for the user's approval: the turn ends asking for them. */
  approvalRequests: ApprovalRequest[];
  /** The approved calls the turn began with, as its first steps. */
  decidedSteps: TurnStep[];
  /** The turn's steps as they are stored, and those an earlier attempt stored. */
  journal: TurnJournal;
  /** The LLM rounds the turn has asked for so far (the next one's index in the journal). */
  rounds: number;
  /** When the user's message was committed, and when the first LLM round started (`performance.now()`): for the stage metrics. */
  committedAt: number;
  firstCallAt: number;
  /** Set when a step could not be stored: the turn fails with it rather than go on unrecorded. */
  stepError: unknown;
  /** The turn's span (tracing on): its LLM and tool calls' spans are its children. */
  span: TurnSpan | undefined;
};

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

  /** Runs one planned turn (in a span of its own when tracing). */
  async run(plan: TurnPlan, request: TurnRequest, clientSystem: ChatMessage[], handlers: TurnHandlers): Promise<TurnOutcome> {
    const tracing = this.deps.tracing;
    if (!tracing) return this.runTurn(plan, request, clientSystem, handlers, undefined);
    const span = tracing.startTurn(request.traceParent, plan.session.sessionId);
    try {
      const outcome = await this.runTurn(plan, request, clientSystem, handlers, span);
      span.end({ usage: outcome.usage, ...(outcome.cancelled ? { error: 'cancelled' } : outcome.failure ? { error: outcome.failure.code ?? 'llm_error' } : {}) });
      return outcome;
    } catch (error) {
      span.end({ usage: null, error: isServiceError(error) ? error.code : error instanceof Error ? error.name : '_OTHER' });
      throw error;
    }
  }

  private async runTurn(plan: TurnPlan, request: TurnRequest, clientSystem: ChatMessage[], handlers: TurnHandlers, span: TurnSpan | undefined): Promise<TurnOutcome> {
    // A turn that decides approval requests runs on a session that no longer waits on them.
    // It is stored with the calls it decided, until its end clears them: a process that finds them there knows this one died.
    const session = plan.approvals ? { ...plan.session, snapshot: withDecided(plan.session.snapshot, plan.approvals) } : plan.session;
    const { sessionId } = session;
    const { store, settings } = this.deps;
    const started = performance.now();
    const { leases } = this.deps;
    const fence = leases ? { holder: leases.holder, generation: plan.generation } : undefined;
    const sentAt = Date.now();
    try {
      await timedStage(this.deps.events, 'user_committed', () =>
        plan.starts
          ? store.persistStart(sessionId, plan.toStore, request.userId, leases?.firstLease)
          : store.persistBeforeAnswer(sessionId, plan.toStore, request.userId, plan.approvals && { progress: progressAtRest(session), fence }),
      );
    } catch (error) {
      // The actor may be ahead of storage now: the client's retry restores the session from it.
      this.cache.distrust(sessionId);
      throw error;
    }
    const committedAt = performance.now();
    // The session's first write took its lease: held for this turn (and the actor's time in the cache) from now on.
    if (plan.starts) leases?.adopt(sessionId, sentAt);
    // Stored without them, cached without them, whatever becomes of the turn: a decided call never runs twice.
    if (plan.approvals) this.cache.remember(sessionId, session, undefined);
    const lastUserText = plan.hashed.filter((turn) => turn.role === 'user').at(-1)?.content ?? '';
    const memories = this.deps.memory && lastUserText ? await this.deps.memory.recall(request.userId, lastUserText) : [];
    const context = buildContext({
      systemPrompt: settings.systemPrompt,
      memories,
      clientSystem,
      dialogue: plan.dialogue,
    });

    // A turn sent again after its attempt died goes on from the steps that attempt stored.
    // Named only when a step is read or stored: a turn without tool calls never hashes it.
    let anchor: string | undefined;
    const anchorOf = () => (anchor ??= TurnJournal.anchorOf(plan.baseHash, plan.hashed));
    const storedSteps = plan.steps ?? (plan.continues && store.journals ? await store.loadSteps(sessionId, anchorOf()) : new Map<string, string>());
    handlers.onSessionReady?.(sessionId);
    if (plan.isNew) this.deps.events.emit('session:created', { sessionId, userId: request.userId });
    const clientTools = request.clientTools ?? [];
    const turn: ActiveTurn = {
      userId: request.userId,
      requestId: request.requestId ?? null,
      // randomUUID draws from a cached pool; randomBytes asks the system every time (1.2% of a turn's CPU in a profile).
      turnId: `turn_${randomUUID().replaceAll('-', '').slice(0, 16)}`,
      usage: {},
      calls: [],
      handlers,
      params: request.params,
      clientTools,
      clientToolNames: new Set(clientTools.map((tool) => (tool.type === 'function' ? tool.function.name : ''))),
      clientToolCalls: [],
      authError: null,
      needsSeparator: false,
      reasoningNeedsSeparator: false,
      transitionLog: [],
      streamed: '',
      roundsShown: [],
      roundsReasoning: [],
      callsUsage: null,
      offered: new Set(),
      toolResults: new Map(),
      approvalRequests: [],
      decidedSteps: [],
      journal: new TurnJournal(
        storedSteps,
        async (steps) => {
          try {
            await handlers.beforeStep?.();
            await store.persistSteps(sessionId, anchorOf(), steps);
          } catch (error) {
            turn.stepError ??= error;
            throw error;
          }
        },
        // Settings for the sweep of abandoned turns, unless the turn has its own way to be finished.
        request.hasOwnResume ? undefined : { params: request.params, system: clientSystem },
      ),
      rounds: 0,
      committedAt,
      firstCallAt: 0,
      stepError: undefined,
      span,
    };
    this.activeTurns.set(sessionId, turn);
    try {
      const decided = plan.approvals ? await this.decide(turn, sessionId, plan.approvals, handlers.signal) : [];
      // The decided calls' results answer the reply that made them; then what goes on.
      const messages = plan.approvals ? [...context, ...decided.map(toolMessage), ...plan.approvals.after] : context;
      const { actor, startsTurn } = this.cache.actorFor(session, request.userId, messages, plan.generation);
      const resumeAt = plan.approvals?.decisions[0]?.request.state;
      const snapshot = await drive(actor, startsTurn ? null : { type: 'user.message', messages, ...(resumeAt ? { resumeAt } : {}) }, handlers.signal);
      if (turn.stepError !== undefined) {
        // What the turn did after its last stored step is unrecorded: the actor is not trusted, the retry continues from the step.
        this.cache.distrust(sessionId);
        throw turn.stepError;
      }
      const { failure, reason } = snapshot.context;
      const cancelled = reason === 'cancelled';
      const failsAsError = this.answersAsError(failure);
      const produced = snapshot.context.messages.slice(messages.length);
      const privateSteps = privateStepsOf(produced, turn.roundsShown);
      const outcome = this.outcomeOf(sessionId, snapshot.context.reply, produced, privateSteps, turn, failure, cancelled);
      const answered = !cancelled && !turn.authError && !failsAsError;
      const reply: Turn = { role: 'assistant', content: outcome.content };
      // A failure's text is stored marked, so later contexts leave it out.
      const replyTurns: Turn[] = answered ? [failure ? { ...reply, role: FAILED_REPLY_ROLE } : reply] : [];
      // An unanswered turn stores nothing more: its steps wait in its journal for the request sent
      // again, which continues from them and stores them with its reply (a turn stopped for a
      // missing account never ran its tool call).
      const held = outcome.approvalRequests.map((request) => request.call);
      const activity = answered ? stepTurns(produced, privateSteps, turn.roundsReasoning, [...held, ...turn.clientToolCalls]) : [];
      const progress = {
        // Cancelled as its process stops, a turn taken over stays abandoned, for the next process.
        snapshot: restingSnapshot(actor, !answered && !(cancelled && handlers.leftAbandonedOnCancel), answered ? outcome.approvalRequests : []),
        currentState: String(snapshot.value),
        transitions: snapshot.context.transitions,
        transitionLog: turn.transitionLog,
        // An unanswered turn leaves the hash where it was, so the same request can be sent again.
        // The client holds every reply as an assistant turn, the failure's text included.
        historyHash: answered ? foldHistoryHash(plan.baseHash, [...plan.hashed, reply]) : plan.baseHash,
        // Tokens are counted whether or not the turn was answered: the LLM server did the work.
        ...(Object.keys(turn.usage).length > 0 ? { usage: mergeUsage(session.usage, turn.usage) } : {}),
      };
      // The decided calls' results are stored whatever becomes of the turn: the approved ones ran.
      const ended = [...decided.map((result) => toTurn(toolMessage(result))), ...activity, ...replyTurns];
      // The outcome with its history hash, made once: for the response's record and for the caller.
      const finished = { ...outcome, historyHash: progress.historyHash };
      const failedAsError = failsAsError && !cancelled && !turn.authError;
      const response = answered ? request.responseRecord?.(finished) : failedAsError ? request.failedResponseRecord?.(finished) : undefined;
      await timedStage(this.deps.events, 'reply_committed', () => store.persistEnd(sessionId, ended, request.userId, progress, fence, response));
      // An unanswered turn keeps its steps for the request sent again; one stopped for a missing
      // account did not run its call, and the request sent once the account is connected starts afresh.
      if ((answered || turn.authError) && turn.journal.isUsed) store.clearSteps(sessionId);
      const recent = plan.recent && [...plan.recent, ...plan.toStore, ...ended].slice(-settings.shortTermTurns);
      this.cache.remember(sessionId, { ...session, ...progress, lastActive: new Date() }, recent, response?.id);
      if (turn.authError) throw turn.authError;
      if (failure && failsAsError) {
        // A conversation that does not fit the model's window is the request's fault, not a failed call.
        if (isContextOverflow(failure)) throw new ServiceError('CONTEXT_LENGTH_EXCEEDED', failure.message, { param: 'messages' });
        throw new ServiceError('UPSTREAM_UNAVAILABLE', `${LLM_FAILURE_PREFIX.slice('Error: '.length)}${failure.message}`, {
          headers: { 'Retry-After': '1' },
        });
      }
      if (this.deps.memory && answered && !failure) {
        const exchange = { userId: request.userId, sessionId, user: lastUserText, assistant: outcome.content };
        const memory = this.deps.memory;
        void store.after(sessionId, 'consolidate long-term memory', () => memory.consolidate(exchange)).catch(() => undefined);
      }
      // Stored calls are in the database before the turn is announced, so a reader told of it finds them.
      await this.storeCalls(sessionId, turn.calls.splice(0));
      this.deps.events.emit('turn:completed', {
        sessionId,
        userId: request.userId,
        durationMs: performance.now() - started,
        outcome: cancelled ? 'cancelled' : failure ? 'llm_error' : 'ok',
        usage: usageTotal(turn.usage),
      });
      return finished;
    } catch (error) {
      // Which of the turn's writes committed is not known here: the next turn reads its last turns.
      this.cache.forgetRecent(sessionId);
      throw error;
    } finally {
      this.activeTurns.delete(sessionId);
      void this.storeCalls(sessionId, turn.calls);
    }
  }

  /** Keeps a call of a running turn in the call log (and, when calls are stored, for the turn's end). */
  private record(turn: ActiveTurn, call: NewCallRecord): void {
    const calls = this.deps.calls;
    if (!calls) return;
    calls.remember(call);
    if (calls.stores) turn.calls.push(call);
  }

  /**
   * Stores a turn's calls after its writes, whatever became of the turn (a failed call matters
   * most). Resolves once they are stored, or after `writeWaitMs` (the write goes on), never rejecting.
   */
  private async storeCalls(sessionId: string, records: NewCallRecord[]): Promise<void> {
    const calls = this.deps.calls;
    if (!calls || records.length === 0) return;
    await this.deps.store.afterWithin(sessionId, 'store calls', () => calls.persist(records));
  }

  /**
   * The session actors' `callLlm`: one LLM call of the running turn. Its text is streamed to the
   * client as it comes when it reaches the reply; a state that may hand over holds it until the
   * round shows whether it did (a hand-off's text is private), and a private step never streams.
   */
  async callLlm(input: CallLlmInput, signal: AbortSignal): Promise<AgentReply> {
    const turn = this.activeTurns.get(input.sessionId);
    if (!turn) throw new Error(`no turn is running for session ${input.sessionId}`);
    const state = input.stateConfig;
    const started = performance.now();
    const streaming = Boolean(turn.handlers.onContent);
    // Without a hand-off to offer (none, or the turn made its most), a reply goes to the user.
    const output = input.output === 'hidden_on_handoff' && input.handoffs.length === 0 ? 'shown' : input.output;
    const clientCallIndexes = new Set<number>();
    // The client's calls reach it only once the round shows they are all it has to run.
    const clientDeltas: ToolCallDelta[] = [];
    // A state that may hand over holds its text and reasoning, in order, until the round shows whether it did.
    const held: Array<{ reasoning: boolean; piece: string }> = [];
    let streamedText = false;
    let streamedReasoning = false;
    const show = (reasoning: boolean, piece: string) => {
      if (reasoning) {
        streamedReasoning = true;
        this.streamReasoning(turn, piece);
      } else {
        streamedText = true;
        this.stream(turn, piece);
      }
    };
    // A piece of text or reasoning as it streams: shown, held until the round ends, or kept private.
    const onPiece = (reasoning: boolean) => (piece: string) => {
      if (output === 'hidden_on_handoff') held.push({ reasoning, piece });
      if (output === 'shown') show(reasoning, piece);
    };
    // The state's tools are described and offered only where a tool state follows to run them.
    const allowed = input.runsTools ? state.tools : [];
    const request: LlmRequest = {
      model: state.model ?? turn.params.model,
      temperature: state.temperature ?? turn.params.temperature,
      max_tokens: state.max_tokens ?? turn.params.max_tokens,
      messages: withStateSystem(input.messages, [this.deps.tools.describe(allowed), state.prompt]),
      tools: [...this.deps.tools.definitions(allowed), ...transferTools(input.handoffs), ...turn.clientTools],
    };
    // What the model may call this round: a call of anything else is answered as an error, not run.
    turn.offered = new Set(request.tools!.map((tool) => (tool.type === 'function' ? tool.function.name : '')));
    // A round an earlier attempt of the turn stored is not asked again: its reply is shown as it came.
    const stored = turn.journal.round(turn.rounds);
    // A call is made only while the user's budgets have room; a turn that reached one ends with what it has.
    let permit: CallPermit | undefined;
    if (!stored && this.deps.budgets) {
      const leave = await this.deps.budgets.beforeCall(turn.userId, input.sessionId, tokensOf(turn.callsUsage), signal);
      if (!('end' in leave)) return budgetStop();
      permit = leave;
    }
    const round = turn.rounds++;
    if (round === 0) {
      turn.firstCallAt = started;
      this.deps.events.emit('turn:stage', { stage: 'prompt', durationMs: started - turn.committedAt });
    }
    const span = turn.span && !stored ? this.deps.tracing?.startLlmCall(turn.span, input.sessionId, request, streaming) : undefined;
    const scope = { sessionId: input.sessionId, userId: turn.userId, turnId: turn.turnId, requestId: turn.requestId, state: input.state, ...span?.ids };
    const start = startCall();
    let body = '';
    const muted = stored !== undefined && turn.handlers.stepsShown === true;
    try {
      const reply = stored
        ? replayed(stored, streaming && !muted ? onPiece : undefined)
        : await this.deps.llm.generate(request, {
            signal,
            onRequestBody: (sent) => {
              body = sent;
            },
            traceparent: span?.traceparent,
            onContent: streaming ? onPiece(false) : undefined,
            onReasoning: streaming ? onPiece(true) : undefined,
            onToolCallDelta:
              streaming && turn.handlers.onToolCallDelta
                ? (delta) => {
                    if (delta.function?.name && turn.clientToolNames.has(delta.function.name)) clientCallIndexes.add(delta.index);
                    if (clientCallIndexes.has(delta.index)) clientDeltas.push(delta);
                  }
                : undefined,
          });
      span?.end({ value: reply });
      permit?.end(reply.usage);
      if (!stored) this.record(turn, llmCallRecord(scope, request, body, start, { value: reply }));
      addUsage(turn.usage, request.model, reply.usage);
      turn.callsUsage = sumUsage(turn.callsUsage, reply.usage);
      const handoff = handoffIn(reply.toolCalls, input.handoffs);
      const shown = output === 'shown' || (output === 'hidden_on_handoff' && handoff === undefined);
      if (shown) for (const { reasoning, piece } of held) show(reasoning, piece);
      // A round its readers were shown before: the next round's text still follows a separator.
      if (streamedText || (muted && shown && reply.content !== '')) turn.needsSeparator = true;
      if (streamedReasoning || (muted && shown && reply.reasoning !== '')) turn.reasoningNeedsSeparator = true;
      turn.roundsShown.push(shown);
      turn.roundsReasoning.push(reply.reasoning);
      if (!stored) {
        this.deps.events.emit('llm:reply', {
          sessionId: input.sessionId,
          durationMs: performance.now() - started,
          finishReason: reply.finishReason,
          toolCalls: reply.toolCalls.length,
          model: request.model,
          usage: reply.usage,
        });
        // A round whose calls the service runs (its tools, a hand-off) is stored before they run, after its text was shown.
        if (reply.toolCalls.some((call) => !turn.clientToolNames.has(call.function.name))) await turn.journal.recordRound(round, reply);
      }
      // The machine keeps what it routes by (its context is persisted): the reasoning and repairs stay here.
      const agentReply: AgentReply = { content: reply.content, toolCalls: reply.toolCalls, finishReason: reply.finishReason, usage: reply.usage };
      // The model chose the next agent state: the transfer wins over the reply's other calls.
      if (handoff) return { ...agentReply, toolCalls: [], handoff };
      const isClients = (call: ToolCall) => turn.clientToolNames.has(call.function.name);
      const forClient = reply.toolCalls.filter(isClients);
      // Where no tool state follows, nothing runs, so nothing waits for approval: the machine answers the calls as errors.
      const heldCalls = input.runsTools ? this.heldFor(input.state, reply.toolCalls.filter((call) => !isClients(call)), input.toolApproval) : [];
      if (forClient.length === 0 && heldCalls.length === 0) return agentReply;
      const heldIds = new Set(heldCalls.map((request) => request.call.id));
      const runnable = reply.toolCalls.filter((call) => !isClients(call) && !heldIds.has(call.id));
      if (runnable.length > 0) {
        // Calls of several kinds: the service's tools that need no approval run first, and the
        // model, given their results, asks for the others again (a client can only answer a
        // reply of its own calls, and a user is asked only for calls the model still wants).
        return { ...agentReply, toolCalls: runnable };
      }
      if (heldCalls.length > 0) {
        // The held calls do not run: the turn ends asking the user (the client's calls, if any, wait for the model to ask again).
        turn.approvalRequests.push(...heldCalls);
        return { ...agentReply, toolCalls: [], finishReason: 'stop' };
      }
      // The client runs these itself: the turn ends here and returns them.
      for (const delta of clientDeltas) turn.handlers.onToolCallDelta?.(delta);
      turn.clientToolCalls = forClient;
      return { ...agentReply, toolCalls: [] };
    } catch (error) {
      // A step that could not be stored is the turn's failure, not the LLM's.
      // A call that failed counted nothing (its permit ended with its reply if the step after it failed).
      permit?.end(null);
      if (error === turn.stepError) throw error;
      span?.end({ error, cancelled: signal.aborted });
      this.record(turn, llmCallRecord(scope, request, body, start, { error, cancelled: signal.aborted }));
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
    try {
      return await this.withHeartbeat(turn, () => Promise.all(input.toolCalls.map((call) => this.runCall(turn, input.state, call, scope))));
    } catch (error) {
      if (isServiceError(error) && error.code === 'TOOL_AUTH_REQUIRED') turn.authError = error;
      throw error;
    }
  }

  /**
   * The approval requests for those of `calls` whose tools wait for the user's approval, by
   * their server's rule or by the rule of the graph's tool state they would run in.
   */
  private heldFor(state: string, calls: ToolCall[], stateRule: StateApproval): ApprovalRequest[] {
    return calls.flatMap((call) => {
      const source = this.deps.tools.approvalFor(call.function.name, stateRequiresApproval(stateRule, call.function.name));
      return source ? [{ id: newApprovalRequestId(), call, ...source, state }] : [];
    });
  }

  /**
   * Carries out the decided approval requests a turn begins with: runs the approved calls (shown
   * as they start and finish, with heartbeats to a quiet stream; they become the turn's first
   * steps) and makes the refused ones' results. Returns each request's result, in order.
   */
  private async decide(turn: ActiveTurn, sessionId: string, approvals: PlannedApprovals, signal: AbortSignal): Promise<ToolCallResult[]> {
    const { decisions } = approvals;
    const scope = { userId: turn.userId, sessionId, signal };
    const carryOut = (decision: ApprovalDecision) => {
      if (!decision.approve) return Promise.resolve(denialResult(decision));
      // An approved call is recorded in the agent state that asked for it; an earlier attempt may have run a resumed one.
      return this.runCall(turn, decision.request.state ?? '', decision.request.call, scope, decision.request, approvals.resumed === true);
    };
    const results = await this.withHeartbeat(turn, () => Promise.all(decisions.map(carryOut)));
    // In the order they started (and were streamed), whichever finished first.
    turn.decidedSteps = decisions.flatMap((decision, index): TurnStep[] =>
      decision.approve ? [{ type: 'tool', call: decision.request.call, result: results[index]!, approvalRequestId: decision.request.id }] : [],
    );
    return results;
  }

  /**
   * Runs one call of the service's tools in graph state `state`, shown as it starts and as it finished, and records it. An approved
   * call (`approved`) whose tool needs an account the user has not connected gets that as its
   * result: the request is decided and cannot be sent again, so the turn goes on. `mayHaveRun`:
   * an earlier attempt may have run it whatever its stored steps say (an approval it decided).
   */
  private async runCall(turn: ActiveTurn, state: string, call: ToolCall, scope: ToolCallScope, approved?: ApprovalRequest, mayHaveRun = false): Promise<ToolCallResult> {
    const approval = approved ? { approvalRequestId: approved.id } : {};
    // A call an earlier attempt of the turn finished is not run again, nor one it may have started whose tool may not run twice.
    const stored = turn.journal.result(call);
    if (stored) return this.showEarlier(turn, call, stored, approval);
    if ((mayHaveRun || turn.journal.mayHaveStarted(call)) && !this.deps.tools.isRepeatable(call.function.name)) {
      return this.showEarlier(turn, call, unknownOutcomeResult(call, approved && { server: approved.server, tool: approved.tool }), approval);
    }
    turn.handlers.onToolActivity?.({ phase: 'started', call, ...approval });
    // An approved call was offered when it was made, in an earlier turn.
    const offered = approved !== undefined || turn.offered.has(call.function.name);
    const span = turn.span && offered ? this.deps.tracing?.startToolCall(turn.span, scope.sessionId, call) : undefined;
    const recordScope = { sessionId: scope.sessionId, userId: turn.userId, turnId: turn.turnId, requestId: turn.requestId, state, ...span?.ids };
    const start = startCall();
    let result: ToolCallResult;
    try {
      result = offered ? await this.deps.tools.call(call, span ? { ...scope, traceparent: span.traceparent } : scope) : unavailableToolResult(call);
      span?.end({ value: result });
    } catch (error) {
      span?.end({ error, cancelled: scope.signal.aborted });
      if (!approved || !isServiceError(error) || error.code !== 'TOOL_AUTH_REQUIRED') {
        this.record(turn, toolCallRecord(recordScope, call, start, { error, cancelled: scope.signal.aborted }, approved?.id));
        throw error;
      }
      result = { toolCallId: call.id, name: call.function.name, content: `Error: ${error.message}`, isError: true, source: { server: approved.server, tool: approved.tool } };
    }
    this.record(turn, toolCallRecord(recordScope, call, start, { value: result }, approved?.id));
    // Stored before the turn goes on: an attempt after this process reuses it, and never runs the call again.
    await turn.journal.recordResult(call, result);
    turn.toolResults.set(call.id, result);
    turn.handlers.onToolActivity?.({ phase: 'finished', call, result, ...approval });
    return result;
  }

  /**
   * The result of a call an earlier attempt of the turn stored, or of one it may have run (of
   * unknown outcome), shown as a call run now would be; an unknown outcome is stored, so a later
   * attempt gives the model the same.
   */
  private async showEarlier(turn: ActiveTurn, call: ToolCall, result: ToolCallResult, approval: { approvalRequestId?: string }): Promise<ToolCallResult> {
    turn.handlers.onToolActivity?.({ phase: 'started', call, ...approval });
    if (!turn.journal.result(call)) await turn.journal.recordResult(call, result);
    turn.toolResults.set(call.id, result);
    turn.handlers.onToolActivity?.({ phase: 'finished', call, result, ...approval });
    return result;
  }

  /** Runs `work` with a heartbeat every `heartbeatMs` to a quiet stream. */
  private async withHeartbeat<T>(turn: ActiveTurn, work: () => Promise<T>): Promise<T> {
    const onHeartbeat = turn.handlers.onHeartbeat;
    const heartbeat = onHeartbeat ? setInterval(onHeartbeat, this.deps.settings.heartbeatMs) : undefined;
    try {
      return await work();
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
    privateSteps: ReadonlySet<ChatMessage>,
    turn: ActiveTurn,
    failure: TurnOutcome['failure'],
    cancelled: boolean,
  ): Omit<TurnOutcome, 'historyHash'> {
    const streaming = Boolean(turn.handlers.onContent);
    const texts = produced
      .filter((message) => message.role === 'assistant' && !privateSteps.has(message))
      .map(textOf)
      .filter((text) => text !== '');
    const steps = [...turn.decidedSteps, ...stepsOf(produced, privateSteps, turn.roundsReasoning, turn.toolResults)];
    const reasoning = steps.map((step) => (step.type === 'reasoning' ? step.text : '')).join('');
    if (failure) {
      // A streaming client saw the failed round's partial text, then the error: that is the reply.
      // (With failures answered as HTTP errors, the gateway ends the stream with an error event.)
      if (streaming && !this.answersAsError(failure)) this.stream(turn, `${LLM_FAILURE_PREFIX}${failure.message}`);
      return {
        sessionId,
        content: streaming ? turn.streamed : [...texts, `${LLM_FAILURE_PREFIX}${failure.message}`].join(ROUND_SEPARATOR),
        reasoning,
        toolCalls: [],
        finishReason: 'stop',
        usage: null,
        failure,
        cancelled,
        steps,
        approvalRequests: [],
      };
    }
    // A cancelled turn asks nothing: it is not answered, and the held calls are forgotten.
    const approvalRequests = cancelled ? [] : turn.approvalRequests;
    const question = approvalRequests.length > 0 ? approvalQuestion(approvalRequests, this.deps.settings.approvalWords) : undefined;
    if (question !== undefined) {
      // The question ends the reply (both APIs store it); a client that shows the requests otherwise is not streamed it.
      if (turn.handlers.onApprovalRequests) turn.handlers.onApprovalRequests(approvalRequests);
      else this.stream(turn, question);
    }
    const toolCalls = turn.clientToolCalls;
    return {
      sessionId,
      content: [...texts, ...(question === undefined ? [] : [question])].join(ROUND_SEPARATOR),
      reasoning,
      toolCalls,
      finishReason: toolCalls.length > 0 ? 'tool_calls' : cancelled ? 'stop' : (reply?.finishReason ?? 'stop'),
      // What the turn's LLM calls used together: the request's usage, however many rounds it took.
      usage: turn.callsUsage,
      failure: null,
      cancelled,
      steps,
      approvalRequests,
    };
  }

  /**
   * Whether a turn's failure is answered as an HTTP error (or an error event mid-stream) rather
   * than as the specification's error text: every failure under `failureMode: 'http'`, and a
   * conversation that does not fit the model's context window (a 400, the request's fault).
   */
  private answersAsError(failure: TurnOutcome['failure']): boolean {
    return failure !== null && (this.deps.settings.failureMode === 'http' || isContextOverflow(failure));
  }

  /** Streams a piece of the model's reasoning, after a separator when an earlier round already streamed some. */
  private streamReasoning(turn: ActiveTurn, piece: string): void {
    if (turn.reasoningNeedsSeparator) {
      turn.reasoningNeedsSeparator = false;
      turn.handlers.onReasoning?.(ROUND_SEPARATOR);
    }
    turn.handlers.onReasoning?.(piece);
  }

  /** Streams a piece of the answer, after a separator when an earlier round already streamed text. */
  private stream(turn: ActiveTurn, piece: string): void {
    if (turn.needsSeparator) {
      turn.needsSeparator = false;
      turn.streamed += ROUND_SEPARATOR;
      turn.handlers.onContent?.(ROUND_SEPARATOR);
    }
    if (turn.streamed === '') this.deps.events.emit('turn:stage', { stage: 'llm_first_byte', durationMs: performance.now() - turn.firstCallAt });
    turn.streamed += piece;
    turn.handlers.onContent?.(piece);
  }
}

/** The tokens of a turn's calls so far, input and output, as its budget counts them. */
function tokensOf(usage: Usage | null): number {
  return usage ? usage.prompt_tokens + usage.completion_tokens : 0;
}

/**
 * The reply of a round whose call a budget did not allow: nothing more, and the turn ends as a
 * reply cut at its length limit ends (`length`), with the text its earlier rounds gave.
 */
function budgetStop(): AgentReply {
  return { content: '', toolCalls: [], finishReason: 'length', usage: null };
}

/** A stored LLM round's reply, its reasoning and text shown through `onPiece` as a live round's are. */
function replayed(reply: LlmReply, onPiece: ((reasoning: boolean) => (piece: string) => void) | undefined): LlmReply {
  if (reply.reasoning !== '') onPiece?.(true)(reply.reasoning);
  if (reply.content !== '') onPiece?.(false)(reply.content);
  return reply;
}

/**
 * Runs the turn on the actor and waits until it rests in a user state again. `turn` is null
 * when the actor is new and its initial agent state starts the turn from its input.
 */
function drive(actor: SessionActor, turn: Extract<SessionEvent, { type: 'user.message' }> | null, signal: AbortSignal) {
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
    if (turn) actor.send(turn);
    if (signal.aborted) onAbort();
  });
}

/**
 * The actor's persisted snapshot at rest, without the finished turn's working messages.
 * `unanswered` marks a turn that ended without a reply (cancelled, or a tool needed an account), so that
 * the same request sent again does not store its messages twice. `pending` are the approval
 * requests the session now waits on (see pending-approvals).
 */
function restingSnapshot(actor: SessionActor, unanswered: boolean, pending: ApprovalRequest[]): unknown {
  const persisted = actor.getPersistedSnapshot() as { context?: Record<string, unknown> };
  // At rest the turn's decided approvals are carried out: their results are stored with it.
  return withDecidedApprovals(withPendingApprovals({ ...persisted, context: { ...persisted.context, messages: [] }, unanswered }, pending), undefined);
}

/** A session's snapshot while a turn carries out the approvals it decided: no longer waiting on them, holding them as decided. */
function withDecided(snapshot: unknown, approvals: PlannedApprovals): unknown {
  return withDecidedApprovals(withPendingApprovals(snapshot, []), { decisions: approvals.decisions, goesOn: approvals.after.length > 0 });
}

/** What a session at rest stores as its progress: its row as it is (a turn that settles approvals before it runs). */
function progressAtRest(session: SessionRecord): SessionProgress {
  // A session waits on approvals only after a turn ended, which stored its state.
  return { snapshot: session.snapshot, currentState: session.currentState ?? '', transitions: session.transitions, historyHash: session.historyHash };
}

/** A tool call's result as the tool message the LLM is given. */
function toolMessage(result: ToolCallResult): ChatMessage {
  return { role: 'tool', tool_call_id: result.toolCallId, content: result.content };
}

/**
 * The assistant messages of a turn's LLM rounds whose text is private (see `roundsShown`): each
 * round produced one assistant message, in order.
 */
function privateStepsOf(produced: ChatMessage[], roundsShown: readonly boolean[]): Set<ChatMessage> {
  const replies = produced.filter((message) => message.role === 'assistant');
  return new Set(replies.filter((_, round) => roundsShown[round] === false));
}

/**
 * What a turn did before its reply, as stored turns: each round's reasoning (`REASONING_ROLE`),
 * each tool call (`tool_call`, its id, name and arguments), each result (`tool`) and each
 * private step's text (`PRIVATE_STEP_ROLE`), in order, then the calls that did not run here (`unrun`: held for approval, or the client's).
 * They are kept in the transcript but, like every role but system, user and assistant, never
 * enter a context.
 */
function stepTurns(produced: ChatMessage[], privateSteps: ReadonlySet<ChatMessage>, reasoning: readonly string[], unrun: ToolCall[]): Turn[] {
  const turns: Turn[] = [];
  let round = 0;
  for (const message of produced) {
    if (message.role === 'assistant') {
      const thought = reasoning[round++] ?? '';
      if (thought !== '') turns.push({ role: REASONING_ROLE, content: thought });
      const text = privateSteps.has(message) ? textOf(message) : '';
      if (text !== '') turns.push({ role: PRIVATE_STEP_ROLE, content: text });
      for (const call of message.tool_calls ?? []) if (call.type === 'function') turns.push(toolCallTurn(call));
    } else if (message.role === 'tool') {
      turns.push(toTurn(message));
    }
  }
  return [...turns, ...unrun.map(toolCallTurn)];
}

/**
 * A turn's steps from the messages its LLM rounds produced: each round's reasoning and text that
 * reach the reply (after the first of each, led by the round separator, as they were streamed) and each of its calls
 * of the service's tools with the result. A call with no result (the turn stopped first, or a
 * `transfer_to_` call) is left out.
 */
function stepsOf(
  produced: ChatMessage[],
  privateSteps: ReadonlySet<ChatMessage>,
  reasoning: readonly string[],
  results: ReadonlyMap<string, ToolCallResult>,
): TurnStep[] {
  const steps: TurnStep[] = [];
  let hasText = false;
  let hasReasoning = false;
  let round = 0;
  for (const message of produced) {
    if (message.role !== 'assistant') continue;
    const thought = privateSteps.has(message) ? '' : (reasoning[round] ?? '');
    round++;
    if (thought !== '') {
      steps.push({ type: 'reasoning', text: hasReasoning ? `${ROUND_SEPARATOR}${thought}` : thought });
      hasReasoning = true;
    }
    const text = privateSteps.has(message) ? '' : textOf(message);
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

/** The result of a call of a tool the calling state does not offer: an error the model reads, the tool not run. */
function unavailableToolResult(call: ToolCall): ToolCallResult {
  const name = call.function.name;
  return { toolCallId: call.id, name, content: `Error: no tool named "${name}" is available here; call only the tools you were offered`, isError: true };
}

/** A failed LLM call refused because the conversation does not fit the model's context window. */
function isContextOverflow(failure: NonNullable<TurnOutcome['failure']>): boolean {
  return failure.source === 'llm' && failure.code === 'context_length_exceeded';
}

