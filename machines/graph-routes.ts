import type { StateType } from './graph-schema.js';

/** The part of a graph the routing helpers read; a parsed `StateGraph` is one, and so is a half-valid file. */
export type GraphTopology = {
  states: Readonly<Record<string, { type?: StateType | undefined; transition: { next: readonly unknown[] } }>>;
};

/** The successors of a state that name existing states, in file order, without repeats. */
export function successorsOf(graph: GraphTopology, name: string): string[] {
  const state = Object.hasOwn(graph.states, name) ? graph.states[name] : undefined;
  const targets = (state?.transition.next ?? []).filter(
    (target): target is string => typeof target === 'string' && Object.hasOwn(graph.states, target),
  );
  return [...new Set(targets)];
}

/** The successors of a state that have the given type, in file order. */
export function successorsOfType(graph: GraphTopology, name: string, type: StateType): string[] {
  return successorsOf(graph, name).filter((target) => graph.states[target]?.type === type);
}

/** Every state reachable from `start` (itself included), in breadth-first order. */
export function reachableStates(graph: GraphTopology, start: string): string[] {
  const order = [start];
  const seen = new Set(order);
  for (let i = 0; i < order.length; i++) {
    for (const target of successorsOf(graph, order[i]!)) {
      if (!seen.has(target)) {
        seen.add(target);
        order.push(target);
      }
    }
  }
  return order;
}

/** The user state a turn that is in `from` ends in: the nearest user-type state reachable from it. */
export function nearestUserState(graph: GraphTopology, from: string): string | undefined {
  return reachableStates(graph, from).find((name) => graph.states[name]?.type === 'user');
}

/** The prefix of the built-in tool an agent state offers per agent state it may hand over to. */
export const TRANSFER_TOOL_PREFIX = 'transfer_to_';

/** The built-in tool that hands the conversation over to the agent state `state`: `transfer_to_<state>`. */
export function transferToolName(state: string): string {
  return `${TRANSFER_TOOL_PREFIX}${state}`;
}

/** Where the generated machine goes from a state: one successor for each outcome (undefined where none applies). */
export type StateRoutes = {
  /** Agent states: the tool-type successor that runs a reply's tool calls. */
  toolCalls: string | undefined;
  /**
   * Agent states: where a reply without tool or transfer calls goes: the user-type successor,
   * else the only agent-type one (a plain hand-off).
   */
  reply: string | undefined;
  /**
   * Agent states: the agent-type successors the model chooses among with a `transfer_to_<state>`
   * call each (routing by the model). They are every agent-type successor of a state that also
   * has a user-type one, or of a state with several and no user-type one.
   */
  handoffs: string[];
  /** User and tool states: the agent-type successor that answers the user message or gets the tool results. */
  next: string | undefined;
  /** The user state the turn ends in when it fails or is cancelled here. */
  resting: string | undefined;
};

/** The routes the generated machine takes out of a state, chosen by the types of its successors. */
export function routesOf(graph: GraphTopology, name: string): StateRoutes {
  const isAgent = graph.states[name]?.type === 'agent';
  const [users, agents, tools] = (['user', 'agent', 'tool'] as const).map((type) => successorsOfType(graph, name, type)) as [string[], string[], string[]];
  const routesByModel = isAgent && (users.length > 0 || agents.length > 1);
  return {
    toolCalls: isAgent ? tools[0] : undefined,
    reply: isAgent ? (users[0] ?? (agents.length === 1 ? agents[0] : undefined)) : undefined,
    handoffs: routesByModel ? agents : [],
    next: isAgent ? undefined : agents[0],
    resting: nearestUserState(graph, name),
  };
}

/**
 * Whether an agent state's text reaches the reply: `shown` (it replies to the user, or sets
 * `show_output`), `hidden` (it always hands over to another agent state: a private step), or
 * `hidden_on_handoff` (a round that ends in a `transfer_to_` call is private, any other is shown).
 */
export type StateOutput = 'shown' | 'hidden' | 'hidden_on_handoff';

/** How the text of the agent state `name` is treated (see `StateOutput`). */
export function outputOf(graph: GraphTopology & { states: Readonly<Record<string, { show_output?: boolean | undefined }>> }, name: string): StateOutput {
  if (graph.states[name]?.show_output === true) return 'shown';
  const routes = routesOf(graph, name);
  if (routes.reply !== undefined && graph.states[routes.reply]?.type === 'agent') return 'hidden';
  return routes.handoffs.length > 0 ? 'hidden_on_handoff' : 'shown';
}
