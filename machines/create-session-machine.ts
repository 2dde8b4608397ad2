import { assign, emit, fromPromise, setup } from 'xstate';
import type { StateValue } from 'xstate';
import type { ChatMessage, ToolCall, Usage } from '../runtime/chat-types.js';
import { routesOf } from './graph-routes.js';
import type { GraphState, StateGraph, StateType } from './graph-schema.js';
import { formatProblem, validateGraph } from './validate-graph.js';

/** What one LLM call in an agent state returned. */
export type AgentReply = { content: string; toolCalls: ToolCall[]; finishReason: string; usage: Usage | null };

/** The input of the `callLlm` actor: the working context and the agent state it runs in. */
export type CallLlmInput = { sessionId: string; state: string; stateConfig: GraphState; messages: ChatMessage[] };

/** The outcome of one tool call; a failed call is a result with `isError`, not an exception. */
export type ToolResult = { toolCallId: string; name: string; content: string; isError: boolean };

/** The input of the `runTools` actor: the last reply's tool calls and the tool state they run in. */
export type RunToolsInput = { sessionId: string; state: string; stateConfig: GraphState; toolCalls: ToolCall[] };

/** The input a session actor is created with; `messages` is the first turn's context when the graph starts in an agent state. */
export type SessionInput = { sessionId: string; maxToolRounds: number; messages?: ChatMessage[] };

/** Why a turn failed: the LLM call or the tool runner threw. */
export type SessionFailure = { source: 'llm' | 'tool'; message: string };

/** Why a transition was taken (the `reason` of the context). */
export type TransitionReason =
  | 'user_message'
  | 'tool_calls'
  | 'tool_results'
  | 'reply'
  | 'tool_round_limit'
  | 'handoff'
  | 'llm_error'
  | 'tool_error'
  | 'cancelled';

/** The context of a session actor; small and JSON-serialisable, since it is persisted. */
export type SessionContext = {
  sessionId: string;
  maxToolRounds: number;
  /** The working context of the current turn. */
  messages: ChatMessage[];
  /** Tool rounds done in this turn. */
  round: number;
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
  /** A new turn: the full working context, assembled by the runtime. */
  | { type: 'user.message'; messages: ChatMessage[] }
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
  },
  actions: {
    startTurn: assign((_, params: { messages: ChatMessage[] }) => ({ messages: params.messages, round: 0, reply: null, failure: null })),
    // Tool calls that will not run stay out of the working context: an assistant message with
    // tool calls must be followed by their results, or the next agent's LLM call is rejected.
    recordReply: assign(({ context }, params: { reply: AgentReply; withToolCalls: boolean }) => ({
      reply: params.reply,
      messages: [...context.messages, assistantMessage(params.reply, params.withToolCalls)],
    })),
    recordToolResults: assign(({ context }, params: { results: ToolResult[] }) => ({
      messages: [
        ...context.messages,
        ...params.results.map((result): ChatMessage => ({ role: 'tool', tool_call_id: result.toolCallId, content: result.content })),
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
      { type: 'recordFailure', params: ({ event }: { event: { error: unknown } }) => ({ source, message: errorMessage(event.error) }) } as const,
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
  return {
    id: name,
    description: graph.states[name]!.description,
    on: {
      'user.message': {
        target: agent,
        actions: [{ type: 'startTurn', params: ({ event }) => ({ messages: event.messages }) }, ...arrive(graph, agent, 'user_message')],
      },
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
  return {
    id: name,
    description: stateConfig.description,
    invoke: {
      src: 'callLlm',
      input: ({ context }) => ({ sessionId: context.sessionId, state: name, stateConfig, messages: context.messages }),
      onDone: [
        ...(toolTarget === undefined
          ? []
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
  const states: Record<string, SessionStateNodeConfig> = Object.fromEntries(
    Object.entries(graph.states).map(([name, state]) => [name, stateBuilders[state.type](graph, name)]),
  );
  return sessionSetup.createMachine({
    id: 'session',
    initial: graph.initial,
    context: ({ input }) => ({
      sessionId: input.sessionId,
      maxToolRounds: input.maxToolRounds,
      messages: input.messages ?? [],
      round: 0,
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
