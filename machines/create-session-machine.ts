import { assign, emit, fromPromise, setup } from 'xstate';
import type { StateValue } from 'xstate';
import type { ChatMessage, ToolCall, Usage } from '../runtime/chat-types.js';
import { outputOf, reachableStates, routesOf, transferToolName } from './graph-routes.js';
import type { StateOutput } from './graph-routes.js';
import type { GraphState, StateGraph, StateType } from './graph-schema.js';
import { formatProblem, validateGraph } from './validate-graph.js';

/**
 * What one LLM call in an agent state returned. `handoff` is the `transfer_to_<state>` call the
 * model chose the next agent state with (its other tool calls are then dropped).
 */
export type AgentReply = { content: string; toolCalls: ToolCall[]; finishReason: string; usage: Usage | null; handoff?: Handoff };

/** A hand-off the model made: the agent state it chose and the `transfer_to_` call that chose it. */
export type Handoff = { state: string; call: ToolCall };

/** A hand-off the model may make from an agent state: offered as the tool `tool`, described by the target's `description`. */
export type HandoffOption = { state: string; tool: string; description: string };

/** Which calls of the tool state a reply's tool calls run in wait for the user's approval (its `require_approval`). */
export type StateApproval = boolean | string[];

/**
 * The input of the `callLlm` actor: the working context and the agent state it runs in, the
 * hand-offs the model may make now (none once the turn has made `maxHandoffs`), whether the
 * state's text reaches the reply, the approval rule of the tool state its calls run in, and
 * whether one follows at all.
 */
export type CallLlmInput = {
  sessionId: string;
  state: string;
  stateConfig: GraphState;
  messages: ChatMessage[];
  handoffs: HandoffOption[];
  output: StateOutput;
  toolApproval: StateApproval;
  /** A tool state follows the agent state: its tools are offered. Without one, none of the service's are. */
  runsTools: boolean;
};

/** The outcome of one tool call; a failed call is a result with `isError`, not an exception. */
export type ToolResult = { toolCallId: string; name: string; content: string; isError: boolean };

/** The input of the `runTools` actor: the last reply's tool calls and the tool state they run in. */
export type RunToolsInput = { sessionId: string; state: string; stateConfig: GraphState; toolCalls: ToolCall[] };

/** The limits a session actor runs under: tool rounds and hand-offs in one turn (the configuration's, also for a restored actor). */
export type SessionLimits = { maxToolRounds: number; maxHandoffs: number };

/** The input a session actor is created with; `messages` is the first turn's context when the graph starts in an agent state. */
export type SessionInput = SessionLimits & { sessionId: string; messages?: ChatMessage[] };

/**
 * Why a turn failed: the LLM call or the tool runner threw; `code`, the error's own code when it
 * has one (an LLM call refused because the conversation does not fit the model's context window).
 */
export type SessionFailure = { source: 'llm' | 'tool'; message: string; code?: string };

/** Why a transition was taken (the `reason` of the context). */
export type TransitionReason =
  | 'user_message'
  | 'tool_calls'
  | 'tool_results'
  | 'reply'
  | 'tool_round_limit'
  | 'handoff'
  | 'approval'
  | 'llm_error'
  | 'tool_error'
  | 'tool_unavailable'
  | 'cancelled';

/** The context of a session actor; small and JSON-serialisable, since it is persisted. */
export type SessionContext = SessionLimits & {
  sessionId: string;
  /** The working context of the current turn. */
  messages: ChatMessage[];
  /** Tool rounds done in this turn. */
  round: number;
  /** Hand-offs (`transfer_to_` calls) made in this turn; absent in snapshots stored before hand-offs existed. */
  handoffs?: number;
  /** The last agent reply. */
  reply: AgentReply | null;
  failure: SessionFailure | null;
  /** Transitions taken since the session began; never reset. */
  transitions: number;
  /** Why the last transition happened (a `TransitionReason`), empty before the first. */
  reason: string;
};

/** The events a session actor accepts. */
export type SessionEvent =
  /**
   * A new turn: the full working context, assembled by the runtime. `resumeAt` names the agent
   * state whose tool calls waited for the user's approval: the decided calls' results (in
   * `messages`) go back to it rather than to the user state's successor.
   */
  | { type: 'user.message'; messages: ChatMessage[]; resumeAt?: string }
  /** The client went away: end the turn now, stopping the LLM call or tool run in flight. */
  | { type: 'turn.cancel' };

/** The events a session actor emits (`actor.on(...)`). */
export type SessionEmitted = { type: 'turn.completed' };

function notProvided(slot: string): () => Promise<never> {
  return () => Promise.reject(new Error(`${slot} actor not provided`));
}

function assistantMessage(reply: AgentReply, withToolCalls: boolean): ChatMessage {
  return withToolCalls && reply.toolCalls.length > 0
    ? { role: 'assistant', content: reply.content, tool_calls: reply.toolCalls }
    : { role: 'assistant', content: reply.content };
}

function errorMessage(error: unknown): string {
  const message = typeof error === 'object' && error !== null ? (error as { message?: unknown }).message : undefined;
  return typeof message === 'string' ? message : String(error);
}

/** The error's own code, when it has a string one. */
function errorCode(error: unknown): { code?: string } {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' ? { code } : {};
}

const sessionSetup = setup({
  types: {
    context: {} as SessionContext,
    events: {} as SessionEvent,
    input: {} as SessionInput,
    emitted: {} as SessionEmitted,
  },
  actors: {
    callLlm: fromPromise<AgentReply, CallLlmInput>(notProvided('callLlm')),
    runTools: fromPromise<ToolResult[], RunToolsInput>(notProvided('runTools')),
  },
  guards: {
    /** The reply asks for tools and the turn has tool rounds left. */
    canRunTools: ({ context }, params: { reply: AgentReply }) =>
      params.reply.toolCalls.length > 0 && context.round < context.maxToolRounds,
    hasToolCalls: (_, params: { reply: AgentReply }) => params.reply.toolCalls.length > 0,
    handsOffTo: (_, params: { reply: AgentReply; state: string }) => params.reply.handoff?.state === params.state,
    resumesAt: ({ event }, params: { state: string }) => event.type === 'user.message' && event.resumeAt === params.state,
  },
  actions: {
    startTurn: assign((_, params: { messages: ChatMessage[] }) => ({ messages: params.messages, round: 0, handoffs: 0, reply: null, failure: null })),
    // Tool calls that will not run stay out of the working context: an assistant message with
    // tool calls must be followed by their results, or the next agent's LLM call is rejected.
    recordReply: assign(({ context }, params: { reply: AgentReply; withToolCalls: boolean }) => ({
      reply: params.reply,
      messages: [...context.messages, assistantMessage(params.reply, params.withToolCalls)],
    })),
    // The next state sees the hand-off as the model made it: the reply with its transfer call,
    // and the call's result naming the state that now answers (as the OpenAI Agents SDK does).
    recordHandoff: assign(({ context }, params: { reply: AgentReply; handoff: Handoff }) => ({
      reply: params.reply,
      messages: [
        ...context.messages,
        { role: 'assistant', content: params.reply.content, tool_calls: [params.handoff.call] } satisfies ChatMessage,
        { role: 'tool', tool_call_id: params.handoff.call.id, content: JSON.stringify({ assistant: params.handoff.state }) } satisfies ChatMessage,
      ],
      handoffs: (context.handoffs ?? 0) + 1,
    })),
    recordToolResults: assign(({ context }, params: { results: ToolResult[] }) => ({
      messages: [
        ...context.messages,
        ...params.results.map((result): ChatMessage => ({ role: 'tool', tool_call_id: result.toolCallId, content: result.content })),
      ],
      round: context.round + 1,
    })),
    // Calls made where no tool state can run them are answered as errors, so the model answers without them.
    recordUnavailableTools: assign(({ context }, params: { reply: AgentReply }) => ({
      messages: [
        ...context.messages,
        ...params.reply.toolCalls.map(
          (call): ChatMessage => ({
            role: 'tool',
            tool_call_id: call.id,
            content: `Error: no tool can run in this state ("${call.function.name}" is not available); answer without calling tools.`,
          }),
        ),
      ],
      round: context.round + 1,
    })),
    recordFailure: assign((_, params: SessionFailure) => ({ failure: params })),
    countTransition: assign(({ context }, params: { reason: TransitionReason }) => ({
      transitions: context.transitions + 1,
      reason: params.reason,
    })),
    completeTurn: emit({ type: 'turn.completed' }),
  },
});

// Graph states are leaves (no `states` of their own), which types a snapshot's value as a string.
type SessionStateNodeConfig = Omit<NonNullable<Parameters<typeof sessionSetup.createMachine>[0]['states']>[string], 'states'>;

/** The actions every transition into `target` ends with: count it, and announce a finished turn at a user state. */
function arrive(graph: StateGraph, target: string, reason: TransitionReason) {
  const count = { type: 'countTransition', params: { reason } } as const;
  return stateTypeOf(graph, target) === 'user' ? [count, 'completeTurn' as const] : [count];
}

/** The transition that ends the turn in `resting` when the invoked LLM call or tool run throws. */
function failTurn(graph: StateGraph, resting: string, source: SessionFailure['source']) {
  return {
    target: resting,
    actions: [
      { type: 'recordFailure', params: ({ event }: { event: { error: unknown } }) => ({ source, message: errorMessage(event.error), ...errorCode(event.error) }) } as const,
      ...arrive(graph, resting, `${source}_error`),
    ],
  };
}

/** What an agent state's transitions read of the event `callLlm` finishing delivers. */
type LlmDone = { event: { output: AgentReply } };

const replyOf = ({ event }: LlmDone) => ({ reply: event.output });

function recordReply(withToolCalls: boolean) {
  return { type: 'recordReply', params: ({ event }: LlmDone) => ({ reply: event.output, withToolCalls }) } as const;
}

function userStateNode(graph: StateGraph, name: string): SessionStateNodeConfig {
  const agent = routesOf(graph, name).next!;
  const startTurn = { type: 'startTurn', params: ({ event }: { event: { messages: ChatMessage[] } }) => ({ messages: event.messages }) } as const;
  // A turn that carries decided approval requests resumes the agent state that asked for them.
  const resumable = reachableStates(graph, graph.initial).filter((state) => stateTypeOf(graph, state) === 'agent');
  return {
    id: name,
    description: graph.states[name]!.description,
    on: {
      'user.message': [
        ...resumable.map((state) => ({
          guard: { type: 'resumesAt' as const, params: { state } },
          target: state,
          actions: [startTurn, ...arrive(graph, state, 'approval')],
        })),
        { target: agent, actions: [startTurn, ...arrive(graph, agent, 'user_message')] },
      ],
    },
  };
}

function agentStateNode(graph: StateGraph, name: string): SessionStateNodeConfig {
  const stateConfig = graph.states[name]!;
  const routes = routesOf(graph, name);
  const toolTarget = routes.toolCalls;
  const replyTarget = routes.reply!;
  const replyReason = stateTypeOf(graph, replyTarget) === 'user' ? 'reply' : 'handoff';
  const resting = routes.resting!;
  const output = outputOf(graph, name);
  const handoffs = routes.handoffs.map((state): HandoffOption => ({ state, tool: transferToolName(state), description: graph.states[state]!.description }));
  const toolApproval = toolTarget === undefined ? false : (graph.states[toolTarget]!.require_approval ?? false);
  return {
    id: name,
    description: stateConfig.description,
    invoke: {
      src: 'callLlm',
      input: ({ context }) => ({
        sessionId: context.sessionId,
        state: name,
        stateConfig,
        messages: context.messages,
        // Past the turn's limit the model is offered no hand-off: the state answers itself.
        handoffs: (context.handoffs ?? 0) < context.maxHandoffs ? handoffs : [],
        output,
        toolApproval,
        runsTools: toolTarget !== undefined,
      }),
      onDone: [
        ...handoffs.map(({ state }) => ({
          guard: { type: 'handsOffTo' as const, params: ({ event }: LlmDone) => ({ reply: event.output, state }) },
          target: state,
          actions: [
            { type: 'recordHandoff', params: ({ event }: LlmDone) => ({ reply: event.output, handoff: event.output.handoff! }) } as const,
            ...arrive(graph, state, 'handoff'),
          ],
        })),
        ...(toolTarget === undefined
          ? [
              {
                // No tool state: the calls are answered as errors and the state asks the model again.
                guard: { type: 'canRunTools' as const, params: replyOf },
                target: name,
                reenter: true,
                actions: [
                  recordReply(true),
                  { type: 'recordUnavailableTools', params: replyOf } as const,
                  ...arrive(graph, name, 'tool_unavailable'),
                ],
              },
            ]
          : [
              {
                guard: { type: 'canRunTools' as const, params: replyOf },
                target: toolTarget,
                actions: [recordReply(true), ...arrive(graph, toolTarget, 'tool_calls')],
              },
              {
                // Tool calls past the round cap are dropped; the reply goes on as a plain one.
                guard: { type: 'hasToolCalls' as const, params: replyOf },
                target: replyTarget,
                actions: [recordReply(false), ...arrive(graph, replyTarget, 'tool_round_limit')],
              },
            ]),
        { target: replyTarget, actions: [recordReply(false), ...arrive(graph, replyTarget, replyReason)] },
      ],
      onError: failTurn(graph, resting, 'llm'),
    },
    on: { 'turn.cancel': { target: resting, actions: arrive(graph, resting, 'cancelled') } },
  };
}

function toolStateNode(graph: StateGraph, name: string): SessionStateNodeConfig {
  const stateConfig = graph.states[name]!;
  const routes = routesOf(graph, name);
  const agent = routes.next!;
  const resting = routes.resting!;
  return {
    id: name,
    description: stateConfig.description,
    invoke: {
      src: 'runTools',
      input: ({ context }) => ({ sessionId: context.sessionId, state: name, stateConfig, toolCalls: context.reply?.toolCalls ?? [] }),
      onDone: {
        target: agent,
        actions: [{ type: 'recordToolResults', params: ({ event }) => ({ results: event.output }) }, ...arrive(graph, agent, 'tool_results')],
      },
      // The tool runner itself failed (a failed tool call is a result, not an error): without
      // results the agent cannot go on, so the turn ends.
      onError: failTurn(graph, resting, 'tool'),
    },
    on: { 'turn.cancel': { target: resting, actions: arrive(graph, resting, 'cancelled') } },
  };
}

const stateBuilders = { user: userStateNode, agent: agentStateNode, tool: toolStateNode } satisfies Record<
  StateType,
  (graph: StateGraph, name: string) => SessionStateNodeConfig
>;

/** Generates the session machine of a state graph; its `callLlm` and `runTools` slots are filled with `machine.provide({ actors })`. */
export function createSessionMachine(graph: StateGraph) {
  const validation = validateGraph(graph);
  if (!validation.ok) {
    throw new Error(`invalid state graph:\n${validation.problems.map(formatProblem).join('\n')}`);
  }
  // States no path reaches are never entered (the validator warns of them): they are not built.
  const states: Record<string, SessionStateNodeConfig> = Object.fromEntries(
    reachableStates(graph, graph.initial).map((name) => [name, stateBuilders[graph.states[name]!.type](graph, name)]),
  );
  return sessionSetup.createMachine({
    id: 'session',
    initial: graph.initial,
    context: ({ input }) => ({
      sessionId: input.sessionId,
      maxToolRounds: input.maxToolRounds,
      maxHandoffs: input.maxHandoffs,
      messages: input.messages ?? [],
      round: 0,
      handoffs: 0,
      reply: null,
      failure: null,
      transitions: 0,
      reason: '',
    }),
    states,
  });
}

/** The machine `createSessionMachine` generates. */
export type SessionMachine = ReturnType<typeof createSessionMachine>;

/** The type of the graph state called `name`, or undefined when the graph has no such state. */
export function stateTypeOf(graph: StateGraph, name: string): StateType | undefined {
  return Object.hasOwn(graph.states, name) ? graph.states[name]?.type : undefined;
}

/** Whether a session in this state is at rest, waiting for the user (a user-type state). */
export function isRestingState(graph: StateGraph, stateValue: StateValue): boolean {
  return typeof stateValue === 'string' && stateTypeOf(graph, stateValue) === 'user';
}
