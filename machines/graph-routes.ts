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

/** Where the generated machine goes from a state: one successor for each outcome (undefined where none applies). */
export type StateRoutes = {
  /** Agent states: the tool-type successor that runs a reply's tool calls. */
  toolCalls: string | undefined;
  /** Agent states: where a plain reply goes, the user-type successor, else the agent-type one (a hand-off). */
  reply: string | undefined;
  /** User and tool states: the agent-type successor that answers the user message or gets the tool results. */
  next: string | undefined;
  /** The user state the turn ends in when it fails or is cancelled here. */
  resting: string | undefined;
};

/** The routes the generated machine takes out of a state, chosen by the types of its successors. */
export function routesOf(graph: GraphTopology, name: string): StateRoutes {
  const first = (type: StateType): string | undefined => successorsOfType(graph, name, type)[0];
  const isAgent = graph.states[name]?.type === 'agent';
  return {
    toolCalls: isAgent ? first('tool') : undefined,
    reply: isAgent ? (first('user') ?? first('agent')) : undefined,
    next: isAgent ? undefined : first('agent'),
    resting: nearestUserState(graph, name),
  };
}
