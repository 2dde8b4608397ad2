import { parseDocument } from 'yaml';
import type { z } from 'zod';
import { nearestUserState, reachableStates, successorsOfType } from './graph-routes.js';
import type { GraphTopology } from './graph-routes.js';
import { STATE_TYPES, StateGraphSchema } from './graph-schema.js';
import type { StateGraph, StateType } from './graph-schema.js';

/** One thing wrong with a graph file: where (a dotted path, `(root)` for the whole file), which state, and what. */
export type GraphProblem = { path: string; state?: string; message: string };

/** The outcome of validating a graph: the parsed graph, or every problem found. */
export type GraphValidation = { ok: true; graph: StateGraph } | { ok: false; problems: GraphProblem[] };

/** The text formats a graph file can be written in. */
export type GraphFormat = 'yaml' | 'json';

/** Checks a parsed graph file against the schema and the rules of the state graph, listing every problem. */
export function validateGraph(raw: unknown): GraphValidation {
  const parsed = StateGraphSchema.safeParse(raw, { error: issueMessage });
  const problems = parsed.success ? [] : parsed.error.issues.flatMap(problemsOfIssue);
  // The graph rules are checked on whatever part of the file is readable, so a schema error
  // elsewhere does not hide them.
  problems.push(...graphProblems(raw));
  if (parsed.success && problems.length === 0) return { ok: true, graph: parsed.data };
  return { ok: false, problems };
}

/** One problem as a line of a report: `  <path>  state <name>  <message>` (the state part when there is one). */
export function formatProblem(problem: GraphProblem): string {
  return `  ${problem.path}${problem.state === undefined ? '' : `  state ${problem.state}`}  ${problem.message}`;
}

/** Parses graph file text (YAML or JSON) and validates it; a syntax error is a problem too. */
export function parseGraphText(text: string, format: GraphFormat): GraphValidation {
  const parsed = format === 'json' ? parseJson(text) : parseYaml(text);
  return 'problems' in parsed ? { ok: false, problems: parsed.problems } : validateGraph(parsed.value);
}

type Parsed = { value: unknown } | { problems: GraphProblem[] };

function parseYaml(text: string): Parsed {
  const doc = parseDocument(text);
  if (doc.errors.length === 0) return { value: doc.toJS() };
  // The yaml package's message is "<what> at line L, column C:" followed by an excerpt.
  const problems = doc.errors.map((error) => ({
    path: ROOT,
    message: `YAML syntax error: ${(error.message.split('\n')[0] ?? '').replace(/:$/, '')}`,
  }));
  return { problems };
}

function parseJson(text: string): Parsed {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch (error) {
    const message = (error as Error).message;
    const position = /at position (\d+)/.exec(message)?.[1];
    return { problems: [{ path: ROOT, message: `JSON syntax error: ${message}${position ? lineAndColumn(text, Number(position)) : ''}` }] };
  }
}

function lineAndColumn(text: string, position: number): string {
  const lines = text.slice(0, position).split('\n');
  return ` (line ${lines.length}, column ${(lines.at(-1)?.length ?? 0) + 1})`;
}

const ROOT = '(root)';

function pathOf(path: readonly PropertyKey[]): string {
  if (path.length === 0) return ROOT;
  return path.map((key, i) => (typeof key === 'number' ? `[${key}]` : `${i === 0 ? '' : '.'}${String(key)}`)).join('');
}

function problemAt(path: readonly PropertyKey[], message: string): GraphProblem {
  const state = path[0] === 'states' && typeof path[1] === 'string' ? path[1] : undefined;
  return state === undefined ? { path: pathOf(path), message } : { path: pathOf(path), state, message };
}

function issueMessage(issue: z.core.$ZodRawIssue): string | undefined {
  if (issue.code === 'invalid_type' && issue.input === undefined) return `is required (${issue.expected})`;
  if (issue.code === 'invalid_value') {
    return `unknown value ${JSON.stringify(issue.input)}; expected one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
  }
  return undefined;
}

function problemsOfIssue(issue: z.core.$ZodIssue): GraphProblem[] {
  if (issue.code === 'unrecognized_keys') return issue.keys.map((key) => problemAt([...issue.path, key], 'unknown field'));
  return [problemAt(issue.path, issue.message)];
}

type LooseState = { type: StateType | undefined; transition: { next: readonly unknown[] } };

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The topology of a possibly invalid file: unreadable types are `undefined`, unreadable transitions empty. */
function looseTopology(states: unknown): GraphTopology & { states: Record<string, LooseState> } {
  const entries = Object.entries(isRecord(states) ? states : {}).map(([name, body]): [string, LooseState] => {
    const type = isRecord(body) && STATE_TYPES.find((t) => t === body.type);
    const next = isRecord(body) && isRecord(body.transition) && Array.isArray(body.transition.next) ? body.transition.next : [];
    return [name, { type: type || undefined, transition: { next } }];
  });
  return { states: Object.fromEntries(entries) };
}

function graphProblems(raw: unknown): GraphProblem[] {
  if (!isRecord(raw)) return [];
  const graph = looseTopology(raw.states);
  const names = Object.keys(graph.states);
  const problems: GraphProblem[] = [];

  const initial = typeof raw.initial === 'string' ? raw.initial : undefined;
  const initialKnown = initial !== undefined && Object.hasOwn(graph.states, initial);
  if (initial !== undefined && !initialKnown) {
    problems.push(problemAt(['initial'], `initial state "${initial}" is not a state of the graph`));
  }
  if (initialKnown && graph.states[initial]?.type === 'tool') {
    problems.push({ ...problemAt(['initial'], 'the initial state must be a user or agent state, not a tool state'), state: initial });
  }
  const reachable = new Set(initialKnown ? reachableStates(graph, initial) : names);
  const allTypesKnown = names.every((name) => graph.states[name]?.type !== undefined);

  for (const name of names) {
    const state = graph.states[name]!;
    state.transition.next.forEach((target, i) => {
      if (typeof target === 'string' && !Object.hasOwn(graph.states, target)) {
        problems.push(problemAt(['states', name, 'transition', 'next', i], `transition to unknown state "${target}"`));
      }
    });
    if (!reachable.has(name)) problems.push(problemAt(['states', name], `state is unreachable from the initial state "${initial}"`));
    for (const message of routingProblems(graph, name, allTypesKnown)) {
      problems.push(problemAt(['states', name, 'transition', 'next'], message));
    }
  }
  return problems;
}

/** What keeps the generated machine from choosing a single successor for each outcome of a state. */
function routingProblems(graph: GraphTopology, name: string, allTypesKnown: boolean): string[] {
  const type = graph.states[name]?.type;
  const next = graph.states[name]?.transition.next ?? [];
  // A successor whose type is unreadable has been reported already; judging without it would mislead.
  const successorTypesKnown = next.every(
    (target) => typeof target !== 'string' || !Object.hasOwn(graph.states, target) || graph.states[target]?.type !== undefined,
  );
  if (type === undefined || !successorTypesKnown) return [];
  const of = (successorType: StateType): string[] => successorsOfType(graph, name, successorType);
  const list = (targets: string[]): string => `(${targets.join(', ')})`;
  const problems: string[] = [];

  if (type === 'agent') {
    const [tools, users, agents] = [of('tool'), of('user'), of('agent')];
    if (tools.length > 1) problems.push(`agent state has more than one tool-type successor ${list(tools)}: which one runs the tool calls is ambiguous`);
    if (users.length > 1) problems.push(`agent state has more than one user-type successor ${list(users)}: which one gets the reply is ambiguous`);
    if (users.length === 0 && agents.length > 1) {
      problems.push(`agent state has no user-type successor and more than one agent-type successor ${list(agents)}: the hand-off is ambiguous`);
    }
    if (users.length === 0 && agents.length === 0) problems.push('agent state has no user-type or agent-type successor to take a plain reply');
    if (allTypesKnown && nearestUserState(graph, name) === undefined) problems.push('agent state has no path back to a user state');
  } else {
    const agents = of('agent');
    const role = type === 'tool' ? 'to return the tool results to' : 'to answer the user message';
    if (agents.length === 0) problems.push(`${type} state has no agent-type successor ${role}`);
    if (agents.length > 1) problems.push(`${type} state has more than one agent-type successor ${list(agents)}: which one is ambiguous`);
  }
  return problems;
}
