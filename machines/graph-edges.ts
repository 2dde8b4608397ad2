import { reachableStates, routesOf, successorsOf, transferToolName } from './graph-routes.js';
import type { StateGraph } from './graph-schema.js';

/**
 * What the machine takes a transition for: 'user message', 'tool calls', 'reply', 'results',
 * `transfer_to_<state>` (a hand-off the model chooses), 'hand-off' (the plain one of a state
 * with a single agent successor and no user one); '' for one it never takes.
 */
export function transitionLabel(graph: StateGraph, from: string, to: string): string {
  const routes = routesOf(graph, from);
  if (to === routes.toolCalls) return 'tool calls';
  if (routes.handoffs.includes(to)) return transferToolName(to);
  if (to === routes.reply) return graph.states[to]?.type === 'user' ? 'reply' : 'hand-off';
  if (to === routes.next) return graph.states[from]?.type === 'user' ? 'user message' : 'results';
  return '';
}

/**
 * One arrow of a drawing: a transition of the file (`label` says what for, '' when the machine
 * never takes it), the way a failed or cancelled call takes to its resting state (`isError`), or both.
 */
export type GraphEdge = { from: string; to: string; label: string; isError: boolean };

/**
 * The arrows of a drawing: every transition to an existing state, in file order, then the error
 * edges (from each agent and tool state the machine has to its resting state) no transition covers.
 */
export function graphEdges(graph: StateGraph): GraphEdge[] {
  const reachable = Object.hasOwn(graph.states, graph.initial) ? reachableStates(graph, graph.initial) : [];
  // Each state's error edge by where it starts; a transition to the same state takes it over.
  const errorEdges = new Map(
    reachable.flatMap((from): Array<[string, string]> => {
      const resting = graph.states[from]?.type === 'user' ? undefined : routesOf(graph, from).resting;
      return resting === undefined ? [] : [[from, resting]];
    }),
  );
  const edges = Object.keys(graph.states).flatMap((from) =>
    successorsOf(graph, from).map((to): GraphEdge => {
      const isError = errorEdges.get(from) === to;
      if (isError) errorEdges.delete(from);
      return { from, to, label: transitionLabel(graph, from, to), isError };
    }),
  );
  for (const [from, to] of errorEdges) edges.push({ from, to, label: '', isError: true });
  return edges;
}
