import { closestName } from './closest-name.js';
import { problemAt } from './graph-problem.js';
import type { GraphProblem } from './graph-problem.js';
import { nearestUserState, outputOf, reachableStates, routesOf, successorsOfType, transferToolName } from './graph-routes.js';
import { STATE_TYPES } from './graph-schema.js';
import type { StateType } from './graph-schema.js';

/** What the graph rules found: errors (the graph cannot run) and warnings (it runs, but likely not as meant). */
export type GraphRuleReport = { errors: GraphProblem[]; warnings: GraphProblem[] };

/** The longest function name OpenAI accepts (`^[a-zA-Z0-9_-]{1,64}$`); a hand-off tool is one. */
export const MAX_TOOL_NAME_LENGTH = 64;

/** A state as far as the rules read it from a possibly invalid file. */
type LooseState = {
  type: StateType | undefined;
  transition: { next: readonly unknown[] };
  show_output: boolean | undefined;
  /** The keys present, whatever their values, for the rules about which type may set what. */
  keys: ReadonlySet<string>;
  /** The `tools` list when it is one. */
  tools: readonly string[] | undefined;
  /** The `require_approval` list when it is one. */
  approvals: readonly string[] | undefined;
};

type LooseGraph = { states: Record<string, LooseState> };

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const stringsOf = (value: unknown): string[] | undefined =>
  Array.isArray(value) && value.every((item) => typeof item === 'string') ? value : undefined;

/** The topology of a possibly invalid file: unreadable types are `undefined`, unreadable transitions empty. */
function looseGraph(states: unknown): LooseGraph {
  const entries = Object.entries(isRecord(states) ? states : {}).map(([name, body]): [string, LooseState] => {
    const fields = isRecord(body) ? body : {};
    const next = isRecord(fields.transition) && Array.isArray(fields.transition.next) ? fields.transition.next : [];
    return [
      name,
      {
        type: STATE_TYPES.find((type) => type === fields.type),
        transition: { next },
        show_output: fields.show_output === true ? true : undefined,
        keys: new Set(Object.keys(fields)),
        tools: stringsOf(fields.tools),
        approvals: stringsOf(fields.require_approval),
      },
    ];
  });
  return { states: Object.fromEntries(entries) };
}

const code = (name: string): string => `\`${name}\``;
const list = (names: readonly string[]): string => `(${names.join(', ')})`;
const NUMBER_WORDS = ['no', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine'];
const count = (n: number): string => NUMBER_WORDS[n] ?? String(n);

/** Checks the rules a graph must follow for the generated machine to run it, on whatever part of the file is readable. */
export function checkGraphRules(raw: unknown): GraphRuleReport {
  const report: GraphRuleReport = { errors: [], warnings: [] };
  if (!isRecord(raw)) return report;
  const graph = looseGraph(raw.states);
  const names = Object.keys(graph.states);
  const isState = (name: unknown): name is string => typeof name === 'string' && Object.hasOwn(graph.states, name);
  const who = (name: string): string => `${graph.states[name]?.type ?? ''} state ${code(name)}`.trimStart();
  const error = (path: PropertyKey[], message: string) => report.errors.push(problemAt(path, message));
  const warning = (path: PropertyKey[], message: string) => report.warnings.push(problemAt(path, message));

  const initial = typeof raw.initial === 'string' ? raw.initial : undefined;
  if (initial !== undefined && !isState(initial)) error(['initial'], unknownInitialMessage(initial, names));
  if (isState(initial) && graph.states[initial]?.type === 'tool') {
    report.errors.push({
      ...problemAt(['initial'], `initial state ${code(initial)} is a tool state: a tool state runs the tool calls of the reply before it, and a new session has none. Set initial to a user state (the user speaks first) or an agent state (the agent speaks first).`),
      state: initial,
    });
  }

  // Routing is judged only where every successor is a state of a readable type: a misspelt
  // successor or an unknown type is reported already, and fixing it may change the verdict.
  const isJudgeable = (name: string): boolean =>
    graph.states[name]?.type !== undefined && graph.states[name]!.transition.next.every((target) => isState(target) && graph.states[target]!.type !== undefined);
  const allJudgeable = names.every(isJudgeable);
  const reachable = new Set(isState(initial) ? reachableStates(graph, initial) : names);

  for (const name of names) {
    const state = graph.states[name]!;
    state.transition.next.forEach((target, i) => {
      if (typeof target === 'string' && !isState(target)) error(['states', name, 'transition', 'next', i], unknownTargetMessage(who(name), target, names));
    });
    for (const [path, message] of placementProblems(graph, name, who(name))) error(['states', name, path], message);
    if (isJudgeable(name)) {
      for (const message of routingProblems(graph, name, who(name))) error(['states', name, 'transition', 'next'], message);
      if (state.type === 'agent' && reachable.has(name) && routesOf(graph, name).toolCalls === undefined && state.tools?.length !== 0) {
        const offered = state.tools ? `lists tools ${list([...state.tools])}` : "offers every tool (it has no `tools:`)";
        warning(
          ['states', name, 'tools'],
          `${who(name)} ${offered}, but no tool state follows it to run them: none of the service's tools is offered in it, and a call the model makes anyway is answered as an error. Set \`tools: []\` to say so, or add a tool state to its transition.next.`,
        );
      }
      if (state.type === 'agent' && state.show_output === true && outputOf({ states: { ...graph.states, [name]: { ...state, show_output: undefined } } }, name) === 'shown') {
        warning(['states', name, 'show_output'], `${who(name)} sets \`show_output: true\`, which has no effect: it has no agent-type successor to hand over to, so its text always reaches the reply. Remove \`show_output\`.`);
      }
    }
    // A user state is where a turn ends; an agent or tool state must lead to one.
    const isStuck = allJudgeable && state.type !== 'user' && nearestUserState(graph, name) === undefined;
    if (!reachable.has(name)) {
      warning(['states', name], unreachableMessage(who(name), initial ?? '', isStuck));
    } else if (isStuck) {
      error(['states', name, 'transition', 'next'], `${who(name)} has no path to a user state: a turn that enters it could never end, and a failed call in it would have no user state to rest in. Add a user state to its transition.next, or to that of a state it leads to.`);
    }
  }
  report.errors.push(...transferNameProblems(graph, names.filter(isJudgeable)));
  if (allJudgeable) report.warnings.push(...approvalListProblems(graph, names));
  return report;
}

function unknownInitialMessage(initial: string, names: string[]): string {
  const what = `initial state ${code(initial)} is not a state of the graph: a session has to start in one of its states.`;
  const suggestion = closestName(initial, names);
  if (suggestion !== undefined) return `${what} Did you mean ${code(suggestion)}?`;
  return names.length === 0 ? `${what} Add the states under \`states:\`.` : `${what} Set initial to one of ${list(names)}.`;
}

function unknownTargetMessage(who: string, target: string, names: string[]): string {
  const what = `${who} has a transition to ${code(target)}, which is not a state of the graph: the machine could never go there.`;
  const suggestion = closestName(target, names);
  if (suggestion !== undefined) return `${what} Did you mean ${code(suggestion)}?`;
  return `${what} Use one of the states ${list(names)}, or remove it from transition.next.`;
}

function unreachableMessage(who: string, initial: string, isStuck: boolean): string {
  const what = isStuck ? `${who} is unreachable, and no user state can be reached from it either` : `${who} is unreachable`;
  const fix = isStuck ? 'Add it to some state\'s transition.next and give it a path to a user state, or remove it.' : 'Add it to some state\'s transition.next, or remove it.';
  return `${what}: no path from the initial state ${code(initial)} leads to it, so the machine never enters it. ${fix}`;
}

/** The per-state keys set on a state of a type they do not apply to, as [key, message] pairs. */
function placementProblems(graph: LooseGraph, name: string, who: string): Array<[string, string]> {
  const state = graph.states[name]!;
  const problems: Array<[string, string]> = [];
  if (state.type === undefined) return problems;
  if (state.type !== 'agent' && state.keys.has('show_output')) {
    problems.push(['show_output', `${who} sets \`show_output\`, which only agent states have: it says whether an agent state's text reaches the reply. Remove it, or move it to an agent state.`]);
  }
  if (state.type !== 'tool' && state.keys.has('require_approval')) {
    const tools = successorsOfType(graph, name, 'tool');
    const target = state.type === 'agent' && tools.length === 1 ? code(tools[0]!) : 'a tool state';
    problems.push(['require_approval', `${who} sets \`require_approval\`, which only tool states have: a call waits for approval in the tool state that runs it. Move it to ${target}.`]);
  }
  return problems;
}

/** What keeps the generated machine from choosing a single successor for each outcome of a state. */
function routingProblems(graph: LooseGraph, name: string, who: string): string[] {
  const type = graph.states[name]!.type;
  const [users, agents, tools] = (['user', 'agent', 'tool'] as const).map((t) => successorsOfType(graph, name, t)) as [string[], string[], string[]];
  const problems: string[] = [];
  if (type === 'agent') {
    if (tools.length > 1) {
      problems.push(`${who} has ${count(tools.length)} tool-type successors ${list(tools)}: its tool calls can run in only one. Keep one of them in transition.next; to offer only some tools here, list them under \`tools:\`.`);
    }
    if (users.length > 1) problems.push(`${who} has ${count(users.length)} user-type successors ${list(users)}: a reply can only go to one. Keep one of them in transition.next.`);
    if (users.length === 0 && agents.length > 1) {
      problems.push(`${who} has ${count(agents.length)} agent-type successors ${list(agents)} and no user-type one: its model hands over with a \`transfer_to_<state>\` call, and a reply without one has nowhere to go. Add a user state to transition.next.`);
    }
    if (users.length === 0 && agents.length === 0) {
      problems.push(`${who} has no user-type or agent-type successor: a plain reply (one without tool calls) has nowhere to go. Add a user state to transition.next to reply to the user, or an agent state to hand over to.`);
    }
    return problems;
  }
  const callers = Object.keys(graph.states).filter((caller) => graph.states[caller]!.type === 'agent' && routesOf(graph, caller).toolCalls === name);
  const [input, needs, fix] =
    type === 'user'
      ? ['a user message', 'needs an agent state to answer it', 'an agent state']
      : ['the tool results', 'need an agent state to read them', `the agent state whose calls it runs${callers.length > 0 ? ` ${list(callers)}` : ''}`];
  if (agents.length === 0) problems.push(`${who} has no agent-type successor: ${input} ${needs}. Add ${fix} to transition.next.`);
  if (agents.length > 1) {
    problems.push(`${who} has ${count(agents.length)} agent-type successors ${list(agents)}: ${input} can go to only one. Keep one of them in transition.next; agents hand over to each other when an agent state lists several agent-type successors (its model picks one with \`transfer_to_<state>\`).`);
  }
  return problems;
}

/** Hand-off targets of the states `sources` whose `transfer_to_<state>` tool name is longer than OpenAI accepts, once per target. */
function transferNameProblems(graph: LooseGraph, sources: string[]): GraphProblem[] {
  const sourcesOf = new Map<string, string[]>();
  for (const name of sources) {
    for (const target of routesOf(graph, name).handoffs) sourcesOf.set(target, [...(sourcesOf.get(target) ?? []), name]);
  }
  const problems: GraphProblem[] = [];
  for (const [target, from] of sourcesOf) {
    const tool = transferToolName(target);
    if (tool.length <= MAX_TOOL_NAME_LENGTH) continue;
    const keep = MAX_TOOL_NAME_LENGTH - (tool.length - target.length);
    problems.push(
      problemAt(['states', target], `agent state ${code(target)} is a hand-off target of ${from.map(code).join(', ')}, chosen with the tool ${code(tool)}, which is ${tool.length} characters long: OpenAI accepts function names of at most ${MAX_TOOL_NAME_LENGTH}. Shorten the state name to ${keep} characters or fewer.`),
    );
  }
  return problems;
}

/** Whether the `tools` entry `pattern` offers the tool the model sees as `name` (see `isAllowed` of the tool catalogue). */
function offers(pattern: string, name: string): boolean {
  if (pattern === '*' || pattern === name) return true;
  const server = (pattern.endsWith('__*') ? pattern.slice(0, -3) : pattern).replace(/[^a-zA-Z0-9_-]/g, '_');
  return name.startsWith(`${server}__`);
}

/**
 * Names in a tool state's `require_approval` list that no agent state routing its tool calls
 * there offers, judged only when every such agent state lists its tools (else any name may be offered).
 */
function approvalListProblems(graph: LooseGraph, names: string[]): GraphProblem[] {
  const problems: GraphProblem[] = [];
  for (const name of names) {
    const approvals = graph.states[name]!.approvals;
    if (graph.states[name]!.type !== 'tool' || approvals === undefined) continue;
    const callers = names.filter((caller) => graph.states[caller]!.type === 'agent' && routesOf(graph, caller).toolCalls === name);
    const offered = callers.map((caller) => graph.states[caller]!.tools);
    if (callers.length === 0 || offered.some((tools) => tools === undefined)) continue;
    const patterns = offered.flat() as string[];
    approvals.forEach((tool, i) => {
      if (patterns.some((pattern) => offers(pattern, tool))) return;
      const suggestion = closestName(tool, patterns);
      const fix =
        suggestion !== undefined
          ? `Did you mean ${code(suggestion)}?`
          : patterns.length === 0
            ? 'They offer no tools (`tools: []`): remove the name.'
            : `Use a name their \`tools:\` lists ${list(patterns)} offer, as the model sees it (\`<server>__<tool>\`).`;
      problems.push(
        problemAt(['states', name, 'require_approval', i], `tool state ${code(name)} requires approval for ${code(tool)}, which none of the agent states whose tool calls it runs (${callers.join(', ')}) offers: if the name is a typo, the call it meant runs without asking. ${fix}`),
      );
    });
  }
  return problems;
}
