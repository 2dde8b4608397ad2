import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { parseGraphText, validateGraph } from '../../machines/index.js';
import type { GraphProblem } from '../../machines/index.js';

const DEFAULT_GRAPH_TEXT = readFileSync(new URL('../../config/default-graph.yaml', import.meta.url), 'utf8');

function state(type: string, next: unknown[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { description: `a ${type} state`, type, transition: { next }, ...extra };
}

/** The specification's graph as plain data, for tests to break one piece at a time. */
function defaultGraph(): { initial: string; states: Record<string, Record<string, unknown>> } {
  return {
    initial: 'agent_reply',
    states: {
      ask_user: state('user', ['agent_reply']),
      agent_reply: state('agent', ['ask_user', 'use_tool']),
      use_tool: state('tool', ['agent_reply']),
    },
  };
}

function problemsOf(raw: unknown): GraphProblem[] {
  const result = validateGraph(raw);
  if (result.ok) throw new Error('expected the graph to be rejected');
  return result.problems;
}

function expectProblem(problems: GraphProblem[], path: string, state: string | undefined, message: RegExp): void {
  const found = problems.some((p) => p.path === path && p.state === state && message.test(p.message));
  expect(found, `no problem at ${path} (state ${state}) matching ${message} in ${JSON.stringify(problems, null, 2)}`).to.equal(true);
}

describe('validateGraph', () => {
  it('accepts the default graph file when it is read as shipped', () => {
    const result = parseGraphText(DEFAULT_GRAPH_TEXT, 'yaml');
    expect(result.ok).to.equal(true);
    if (!result.ok) return;
    expect(result.graph.initial).to.equal('agent_reply');
    expect(Object.fromEntries(Object.entries(result.graph.states).map(([name, s]) => [name, [s.type, s.transition.next]]))).to.deep.equal({
      ask_user: ['user', ['agent_reply']],
      agent_reply: ['agent', ['ask_user', 'use_tool']],
      use_tool: ['tool', ['agent_reply']],
    });
  });

  it('keeps the per-state extras when they are given', () => {
    const graph = defaultGraph();
    graph.states.agent_reply = state('agent', ['ask_user', 'use_tool'], {
      prompt: 'Be brief.',
      tools: ['echo'],
      model: 'small',
      temperature: 0.2,
      max_tokens: 256,
    });
    const result = validateGraph(graph);
    expect(result.ok).to.equal(true);
    if (result.ok) expect(result.graph.states.agent_reply).to.include({ prompt: 'Be brief.', model: 'small', temperature: 0.2, max_tokens: 256 });
  });

  it('accepts a graph with a planner and a reviewer when the planner hands off to the reviewer', () => {
    const result = validateGraph({
      initial: 'ask_user',
      states: {
        ask_user: state('user', ['planner']),
        planner: state('agent', ['reviewer', 'planner_tools']),
        planner_tools: state('tool', ['planner']),
        reviewer: state('agent', ['ask_user']),
      },
    });
    expect(result.ok).to.equal(true);
  });

  it('reports the zod path when a state has an unknown type', () => {
    const graph = defaultGraph();
    graph.states.agent_reply!.type = 'robot';
    const problems = problemsOf(graph);
    expectProblem(problems, 'states.agent_reply.type', 'agent_reply', /unknown value "robot".*"user", "agent", "tool"/);
  });

  it('reports a missing field when a state has no description', () => {
    const graph = defaultGraph();
    delete graph.states.use_tool!.description;
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.use_tool.description', 'use_tool', /required/);
  });

  it('reports out-of-range model parameters when temperature or max_tokens is wrong', () => {
    const graph = defaultGraph();
    graph.states.agent_reply = state('agent', ['ask_user', 'use_tool'], { temperature: 2.5, max_tokens: 0 });
    const problems = problemsOf(graph);
    expectProblem(problems, 'states.agent_reply.temperature', 'agent_reply', /<=\s*2/);
    expectProblem(problems, 'states.agent_reply.max_tokens', 'agent_reply', />\s*0/);
  });

  it('reports an unknown field when a state has a misspelt key', () => {
    const graph = defaultGraph();
    graph.states.agent_reply!.promt = 'typo';
    expectProblem(problemsOf(graph), 'states.agent_reply.promt', 'agent_reply', /unknown field/);
  });

  it('rejects a state name when it is not snake_case', () => {
    const graph = defaultGraph();
    delete graph.states.use_tool;
    graph.states.UseTool = state('tool', ['agent_reply']);
    graph.states.agent_reply = state('agent', ['ask_user', 'UseTool']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.UseTool', 'UseTool', /snake_case/);
  });

  it('reports the initial state when it is missing', () => {
    const { states } = defaultGraph();
    expectProblem(problemsOf({ states }), 'initial', undefined, /required/);
  });

  it('reports the initial state when it names no state', () => {
    const graph = { ...defaultGraph(), initial: 'start' };
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'initial', undefined, /"start" is not a state/);
  });

  it('rejects the initial state when it is a tool state', () => {
    const problems = problemsOf({ ...defaultGraph(), initial: 'use_tool' });
    expectProblem(problems, 'initial', 'use_tool', /user or agent state/);
  });

  it('reports the transition by index when it targets an unknown state', () => {
    const graph = defaultGraph();
    graph.states.use_tool = state('tool', ['agent_reply', 'nowhere']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.use_tool.transition.next[1]', 'use_tool', /unknown state "nowhere"/);
  });

  it('reports a state when it cannot be reached from the initial state', () => {
    const graph = defaultGraph();
    graph.states.orphan = state('agent', ['ask_user']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.orphan', 'orphan', /unreachable from the initial state "agent_reply"/);
  });

  it('reports an agent state when it has no path back to a user state', () => {
    const problems = problemsOf({
      initial: 'agent_reply',
      states: { agent_reply: state('agent', ['use_tool']), use_tool: state('tool', ['agent_reply']) },
    });
    expectProblem(problems, 'states.agent_reply.transition.next', 'agent_reply', /no path back to a user state/);
  });

  it('reports a tool state when it has no agent successor', () => {
    const graph = defaultGraph();
    graph.states.use_tool = state('tool', ['ask_user']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.use_tool.transition.next', 'use_tool', /tool state has no agent-type successor/);
  });

  it('reports an agent state as ambiguous when it has two tool successors', () => {
    const graph = defaultGraph();
    graph.states.other_tool = state('tool', ['agent_reply']);
    graph.states.agent_reply = state('agent', ['ask_user', 'use_tool', 'other_tool']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.agent_reply.transition.next', 'agent_reply', /more than one tool-type successor \(use_tool, other_tool\)/);
  });

  it('reports an agent state as ambiguous when it has two user successors', () => {
    const graph = defaultGraph();
    graph.states.ask_again = state('user', ['agent_reply']);
    graph.states.agent_reply = state('agent', ['ask_user', 'use_tool', 'ask_again']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.agent_reply.transition.next', 'agent_reply', /more than one user-type successor \(ask_user, ask_again\)/);
  });

  it('reports an agent state when a plain reply has nowhere to go', () => {
    const problems = problemsOf({
      initial: 'ask_user',
      states: {
        ask_user: state('user', ['planner']),
        planner: state('agent', ['planner_tools']),
        planner_tools: state('tool', ['reviewer']),
        reviewer: state('agent', ['ask_user']),
      },
    });
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.planner.transition.next', 'planner', /no user-type or agent-type successor/);
  });

  it('reports a user state when it has no agent successor', () => {
    const graph = defaultGraph();
    graph.states.ask_user = state('user', ['use_tool']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.ask_user.transition.next', 'ask_user', /user state has no agent-type successor/);
  });

  it('lists every problem when the graph has several', () => {
    const graph = defaultGraph();
    graph.states.agent_reply!.type = 'robot';
    graph.states.ask_user = state('user', ['agent_reply', 'nowhere']);
    graph.states.use_tool = state('tool', []);
    graph.states.orphan = state('user', ['agent_reply']);
    const problems = problemsOf(graph);
    expectProblem(problems, 'states.agent_reply.type', 'agent_reply', /unknown value/);
    expectProblem(problems, 'states.ask_user.transition.next[1]', 'ask_user', /unknown state "nowhere"/);
    expectProblem(problems, 'states.use_tool.transition.next', 'use_tool', /no agent-type successor/);
    expectProblem(problems, 'states.orphan', 'orphan', /unreachable/);
    expect(problems).to.have.length(4);
  });

  it('reports the whole document when it is not a mapping', () => {
    expectProblem(problemsOf(['not', 'a', 'graph']), '(root)', undefined, /expected object/);
  });
});

describe('parseGraphText', () => {
  it('reads the same graph when it is written as JSON', () => {
    const result = parseGraphText(JSON.stringify(defaultGraph()), 'json');
    const fromYaml = parseGraphText(DEFAULT_GRAPH_TEXT, 'yaml');
    expect(result.ok).to.equal(true);
    if (result.ok && fromYaml.ok) {
      expect(result.graph.initial).to.equal(fromYaml.graph.initial);
      expect(Object.keys(result.graph.states)).to.have.members(Object.keys(fromYaml.graph.states));
    }
  });

  it('validates what it parsed when the YAML is well-formed but the graph is not', () => {
    const result = parseGraphText('initial: nowhere\nstates: {}\n', 'yaml');
    expect(result.ok).to.equal(false);
    if (!result.ok) expectProblem(result.problems, 'initial', undefined, /"nowhere" is not a state/);
  });

  it('gives a problem with the line when the YAML has a syntax error', () => {
    const result = parseGraphText('initial: agent_reply\nstates: [oops\n  x: 1\n', 'yaml');
    expect(result.ok).to.equal(false);
    if (!result.ok) expectProblem(result.problems, '(root)', undefined, /^YAML syntax error: .*line \d+, column \d+/);
  });

  it('gives a problem when a YAML mapping repeats a state name', () => {
    const text = DEFAULT_GRAPH_TEXT.replace('\n  use_tool:', '\n  ask_user:');
    const result = parseGraphText(text, 'yaml');
    expect(result.ok).to.equal(false);
    if (!result.ok) expectProblem(result.problems, '(root)', undefined, /unique/);
  });

  it('gives a problem with the line when the JSON has a syntax error', () => {
    const result = parseGraphText('{\n  "initial": "agent_reply",\n}', 'json');
    expect(result.ok).to.equal(false);
    if (!result.ok) expectProblem(result.problems, '(root)', undefined, /^JSON syntax error: .*\(line 3, column 1\)/);
  });
});
