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

/** The warnings of a graph that must be accepted. */
function warningsOf(raw: unknown): GraphProblem[] {
  const result = validateGraph(raw);
  if (!result.ok) throw new Error(`expected the graph to be accepted: ${JSON.stringify(result.problems, null, 2)}`);
  return result.warnings;
}

/** A graph whose agent state `triage` hands over to the agent states `billing` and `support`. */
function triageGraph(): { initial: string; states: Record<string, Record<string, unknown>> } {
  return {
    initial: 'ask_user',
    states: {
      ask_user: state('user', ['triage']),
      // No tool state follows them: they say they offer no tools.
      triage: state('agent', ['ask_user', 'billing', 'support'], { tools: [] }),
      billing: state('agent', ['ask_user'], { tools: [] }),
      support: state('agent', ['ask_user'], { tools: [] }),
    },
  };
}

function expectProblem(problems: GraphProblem[], path: string, state: string | undefined, message: RegExp): void {
  const found = problems.some((p) => p.path === path && p.state === state && message.test(p.message));
  expect(found, `no problem at ${path} (state ${state}) matching ${message} in ${JSON.stringify(problems, null, 2)}`).to.equal(true);
}

describe('validateGraph', () => {
  it('accepts the default graph file without warnings when it is read as shipped', () => {
    const result = parseGraphText(DEFAULT_GRAPH_TEXT, 'yaml');
    expect(result.ok).to.equal(true);
    if (!result.ok) return;
    expect(result.warnings).to.deep.equal([]);
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
        reviewer: state('agent', ['ask_user'], { tools: [] }),
      },
    });
    expect(result.ok).to.equal(true);
    if (result.ok) expect(result.warnings).to.deep.equal([]);
  });

  it('accepts an agent state with several agent successors when it also has a user successor', () => {
    expect(warningsOf(triageGraph())).to.deep.equal([]);
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
    expectProblem(problemsOf(graph), 'states.agent_reply.promt', 'agent_reply', /^unknown field: did you mean `prompt`\?$/);
  });

  it('lists the fields an unknown field could have been when none is close', () => {
    const graph = defaultGraph();
    graph.states.use_tool!.transition = { next: ['agent_reply'], after: 1 };
    expectProblem(problemsOf(graph), 'states.use_tool.transition.after', 'use_tool', /^unknown field: the fields here are next$/);
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

  it('suggests the closest state when the initial state names no state but one is close', () => {
    const problems = problemsOf({ ...defaultGraph(), initial: 'agent_repl' });
    expect(problems).to.have.length(1);
    expectProblem(problems, 'initial', undefined, /^initial state `agent_repl` is not a state of the graph: a session has to start in one of its states\. Did you mean `agent_reply`\?$/);
  });

  it('lists the states when the initial state names no state and none is close', () => {
    const problems = problemsOf({ ...defaultGraph(), initial: 'start' });
    expect(problems).to.have.length(1);
    expectProblem(problems, 'initial', undefined, /`start` is not a state of the graph.*Set initial to one of \(ask_user, agent_reply, use_tool\)\.$/);
  });

  it('rejects the initial state with the fix when it is a tool state', () => {
    const problems = problemsOf({ ...defaultGraph(), initial: 'use_tool' });
    expectProblem(problems, 'initial', 'use_tool', /^initial state `use_tool` is a tool state: .*Set initial to a user state .* or an agent state/);
  });

  it('suggests the closest state when a transition targets an unknown state close to one', () => {
    const graph = defaultGraph();
    graph.states.use_tool = state('tool', ['agent_repy']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.use_tool.transition.next[0]', 'use_tool', /^tool state `use_tool` has a transition to `agent_repy`, which is not a state of the graph: .* Did you mean `agent_reply`\?$/);
  });

  it('reports the transition by index and lists the states when it targets an unknown state close to none', () => {
    const graph = defaultGraph();
    graph.states.use_tool = state('tool', ['agent_reply', 'nowhere']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.use_tool.transition.next[1]', 'use_tool', /`nowhere`, which is not a state of the graph.*Use one of the states \(ask_user, agent_reply, use_tool\), or remove it from transition\.next\.$/);
  });

  it('warns about a state, without rejecting the graph, when no path from the initial state reaches it', () => {
    const graph = defaultGraph();
    graph.states.orphan = state('agent', ['ask_user']);
    const warnings = warningsOf(graph);
    expect(warnings).to.have.length(1);
    expectProblem(warnings, 'states.orphan', 'orphan', /^agent state `orphan` is unreachable: no path from the initial state `agent_reply` leads to it, so the machine never enters it\. Add it to some state's transition\.next, or remove it\.$/);
  });

  it('folds a missing path to a user state into the warning when the state is unreachable', () => {
    const graph = defaultGraph();
    graph.states.loop_a = state('agent', ['loop_b']);
    graph.states.loop_b = state('agent', ['loop_a']);
    const warnings = warningsOf(graph);
    expect(warnings).to.have.length(2);
    for (const name of ['loop_a', 'loop_b']) {
      expectProblem(warnings, `states.${name}`, name, /is unreachable, and no user state can be reached from it either: .*give it a path to a user state, or remove it/);
    }
  });

  it('gives the warnings with the problems when the graph is rejected', () => {
    const graph = defaultGraph();
    graph.states.orphan = state('user', ['agent_reply']);
    graph.states.agent_reply!.temperature = 3;
    const result = validateGraph(graph);
    expect(result.ok).to.equal(false);
    expectProblem(result.warnings, 'states.orphan', 'orphan', /^user state `orphan` is unreachable/);
  });

  it('reports an agent state when it has no path to a user state', () => {
    const problems = problemsOf({
      initial: 'agent_reply',
      states: { agent_reply: state('agent', ['use_tool']), use_tool: state('tool', ['agent_reply']) },
    });
    expectProblem(problems, 'states.agent_reply.transition.next', 'agent_reply', /^agent state `agent_reply` has no path to a user state: a turn that enters it could never end.*Add a user state/);
  });

  it('reports every reachable agent and tool state from which no user state can be reached, and only those', () => {
    const problems = problemsOf({
      initial: 'ask_user',
      states: {
        ask_user: state('user', ['front']),
        front: state('agent', ['ask_user', 'front_tools']),
        front_tools: state('tool', ['back']),
        back: state('agent', ['echo']),
        echo: state('agent', ['back']),
      },
    });
    expect(problems.map((p) => p.state)).to.have.members(['front_tools', 'back', 'echo']);
    expectProblem(problems, 'states.front_tools.transition.next', 'front_tools', /^tool state `front_tools` has no path to a user state/);
    expectProblem(problems, 'states.back.transition.next', 'back', /^agent state `back` has no path to a user state/);
  });

  it('reports a tool state with the agent state to add when it has no agent successor', () => {
    const graph = defaultGraph();
    graph.states.use_tool = state('tool', ['ask_user']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.use_tool.transition.next', 'use_tool', /^tool state `use_tool` has no agent-type successor: the tool results need an agent state to read them\. Add the agent state whose calls it runs \(agent_reply\) to transition\.next\.$/);
  });

  it('reports a tool state and explains hand-offs when it has two agent successors', () => {
    const graph = triageGraph();
    graph.states.triage = state('agent', ['ask_user', 'billing', 'support', 'triage_tools']);
    graph.states.triage_tools = state('tool', ['triage', 'billing']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.triage_tools.transition.next', 'triage_tools', /^tool state `triage_tools` has two agent-type successors \(triage, billing\): the tool results can go to only one\. Keep one of them in transition\.next; agents hand over to each other when an agent state lists several agent-type successors .*`transfer_to_<state>`/);
  });

  it('reports an agent state with the fix when it has two tool successors', () => {
    const graph = defaultGraph();
    graph.states.other_tool = state('tool', ['agent_reply']);
    graph.states.agent_reply = state('agent', ['ask_user', 'use_tool', 'other_tool']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.agent_reply.transition.next', 'agent_reply', /^agent state `agent_reply` has two tool-type successors \(use_tool, other_tool\): its tool calls can run in only one\. Keep one of them in transition\.next; .*`tools:`/);
  });

  it('reports an agent state with the fix when it has two user successors', () => {
    const graph = triageGraph();
    graph.states.escalate = state('user', ['triage']);
    graph.states.triage = state('agent', ['ask_user', 'escalate', 'billing']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.triage.transition.next', 'triage', /^agent state `triage` has two user-type successors \(ask_user, escalate\): a reply can only go to one\. Keep one of them in transition\.next\.$/);
  });

  it('reports an agent state when it has several agent successors and no user successor', () => {
    const graph = triageGraph();
    graph.states.triage = state('agent', ['billing', 'support']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.triage.transition.next', 'triage', /^agent state `triage` has two agent-type successors \(billing, support\) and no user-type one: .*a reply without one has nowhere to go\. Add a user state to transition\.next\.$/);
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
    expectProblem(problems, 'states.planner.transition.next', 'planner', /^agent state `planner` has no user-type or agent-type successor: a plain reply .* has nowhere to go\. Add a user state to transition\.next to reply to the user, or an agent state to hand over to\.$/);
  });

  it('reports a user state when it has no agent successor', () => {
    const graph = defaultGraph();
    graph.states.ask_user = state('user', ['use_tool']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.ask_user.transition.next', 'ask_user', /^user state `ask_user` has no agent-type successor: a user message needs an agent state to answer it\. Add an agent state to transition\.next\.$/);
  });

  it('reports a user state and explains hand-offs when it has two agent successors', () => {
    const graph = triageGraph();
    graph.states.ask_user = state('user', ['triage', 'billing']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.ask_user.transition.next', 'ask_user', /^user state `ask_user` has two agent-type successors \(triage, billing\): a user message can go to only one\. .*transfer_to_/);
  });

  it('warns that show_output has no effect when the agent state never hands over', () => {
    const graph = defaultGraph();
    graph.states.agent_reply!.show_output = true;
    const warnings = warningsOf(graph);
    expect(warnings).to.have.length(1);
    expectProblem(warnings, 'states.agent_reply.show_output', 'agent_reply', /^agent state `agent_reply` sets `show_output: true`, which has no effect: .*Remove `show_output`\.$/);
  });

  it('warns that an agent state with no tool state after it offers no tools, unless it says tools: []', () => {
    const graph = triageGraph();
    delete graph.states.support!.tools;
    graph.states.billing!.tools = ['everything__get-sum'];
    const warnings = warningsOf(graph);
    expect(warnings.map((warning) => warning.path).sort()).to.deep.equal(['states.billing.tools', 'states.support.tools']);
    expectProblem(warnings, 'states.support.tools', 'support', /^agent state `support` offers every tool \(it has no `tools:`\), but no tool state follows it to run them: .*Set `tools: \[\]` to say so/);
    expectProblem(warnings, 'states.billing.tools', 'billing', /^agent state `billing` lists tools \(everything__get-sum\), but no tool state follows it/);
    expect(warningsOf(defaultGraph())).to.deep.equal([]);
  });

  it('accepts show_output without a warning when the agent state hands over', () => {
    const graph = triageGraph();
    graph.states.triage!.show_output = true;
    expect(warningsOf(graph)).to.deep.equal([]);
    const plain = triageGraph();
    plain.states.billing = state('agent', ['support'], { show_output: true, tools: [] });
    expect(warningsOf(plain)).to.deep.equal([]);
  });

  it('rejects show_output when a tool or user state sets it', () => {
    const graph = defaultGraph();
    graph.states.use_tool!.show_output = true;
    graph.states.ask_user!.show_output = false;
    const problems = problemsOf(graph);
    expect(problems).to.have.length(2);
    expectProblem(problems, 'states.use_tool.show_output', 'use_tool', /^tool state `use_tool` sets `show_output`, which only agent states have: .*Remove it, or move it to an agent state\.$/);
    expectProblem(problems, 'states.ask_user.show_output', 'ask_user', /^user state `ask_user` sets `show_output`/);
  });

  it('accepts require_approval when a tool state sets it to a boolean or a list', () => {
    const graph = defaultGraph();
    graph.states.use_tool!.require_approval = true;
    expect(warningsOf(graph)).to.deep.equal([]);
    graph.states.use_tool!.require_approval = ['fs__delete'];
    expect(warningsOf(graph)).to.deep.equal([]);
  });

  it('rejects require_approval with the tool state to move it to when an agent state sets it', () => {
    const graph = defaultGraph();
    graph.states.agent_reply!.require_approval = true;
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, 'states.agent_reply.require_approval', 'agent_reply', /^agent state `agent_reply` sets `require_approval`, which only tool states have: .*Move it to `use_tool`\.$/);
  });

  it('rejects require_approval when a user state sets it', () => {
    const graph = defaultGraph();
    graph.states.ask_user!.require_approval = ['fs__delete'];
    expectProblem(problemsOf(graph), 'states.ask_user.require_approval', 'ask_user', /^user state `ask_user` sets `require_approval`.*Move it to a tool state\.$/);
  });

  it('warns about a require_approval name when no agent state whose calls the tool state runs offers it', () => {
    const graph = defaultGraph();
    graph.states.agent_reply!.tools = ['fs__read', 'fs__delete'];
    graph.states.use_tool!.require_approval = ['fs__delete', 'fs__delet'];
    const warnings = warningsOf(graph);
    expect(warnings).to.have.length(1);
    expectProblem(warnings, 'states.use_tool.require_approval[1]', 'use_tool', /^tool state `use_tool` requires approval for `fs__delet`, which none of the agent states whose tool calls it runs \(agent_reply\) offers: if the name is a typo, the call it meant runs without asking\. Did you mean `fs__delete`\?$/);
  });

  it('lists the offered tools when a require_approval name is close to none', () => {
    const graph = defaultGraph();
    graph.states.agent_reply!.tools = ['fs__read'];
    graph.states.use_tool!.require_approval = ['mail__send'];
    expectProblem(warningsOf(graph), 'states.use_tool.require_approval[0]', 'use_tool', /Use a name their `tools:` lists \(fs__read\) offer/);
  });

  it('accepts require_approval names that a server pattern or * in tools offers', () => {
    const graph = defaultGraph();
    graph.states.agent_reply!.tools = ['fs', 'mail__*', 'web__fetch'];
    graph.states.use_tool!.require_approval = ['fs__delete', 'mail__send', 'web__fetch'];
    expect(warningsOf(graph)).to.deep.equal([]);
    graph.states.agent_reply!.tools = ['*'];
    graph.states.use_tool!.require_approval = ['anything__at_all'];
    expect(warningsOf(graph)).to.deep.equal([]);
  });

  it('does not judge require_approval names when an agent state routing calls to the tool state offers every tool', () => {
    const graph = triageGraph();
    graph.states.triage = state('agent', ['ask_user', 'billing', 'support', 'shared_tools'], { tools: ['fs__read'] });
    graph.states.billing = state('agent', ['ask_user', 'shared_tools']);
    graph.states.shared_tools = state('tool', ['triage'], { require_approval: ['payments__refund'] });
    expect(warningsOf(graph)).to.deep.equal([]);
  });

  it('rejects a hand-off target when its transfer_to_ tool name is longer than 64 characters', () => {
    const long = `billing_${'x'.repeat(46)}`; // 54 characters: transfer_to_ makes 66
    const graph = triageGraph();
    graph.states[long] = graph.states.billing!;
    delete graph.states.billing;
    graph.states.triage = state('agent', ['ask_user', long, 'support']);
    const problems = problemsOf(graph);
    expect(problems).to.have.length(1);
    expectProblem(problems, `states.${long}`, long, /^agent state `billing_x+` is a hand-off target of `triage`, chosen with the tool `transfer_to_billing_x+`, which is 66 characters long: OpenAI accepts function names of at most 64\. Shorten the state name to 52 characters or fewer\.$/);
  });

  it('reports a too long transfer_to_ name along with a misspelt transition elsewhere', () => {
    const long = `billing_${'x'.repeat(46)}`;
    const graph = triageGraph();
    graph.states[long] = graph.states.billing!;
    delete graph.states.billing;
    graph.states.triage = state('agent', ['ask_user', long, 'support']);
    graph.states.support = state('agent', ['ask_usr']);
    const problems = problemsOf(graph);
    expectProblem(problems, 'states.support.transition.next[0]', 'support', /Did you mean `ask_user`\?$/);
    expectProblem(problems, `states.${long}`, long, /66 characters long/);
    expect(problems).to.have.length(2);
  });

  it('accepts a long state name when its transfer_to_ tool fits in 64 characters or it is no model-chosen hand-off', () => {
    const fits = `billing_${'x'.repeat(44)}`; // 52 characters: transfer_to_ makes 64
    const graph = triageGraph();
    graph.states[fits] = state('agent', ['ask_user'], { tools: [] });
    graph.states.triage = state('agent', ['ask_user', fits, 'support'], { tools: [] });
    delete graph.states.billing;
    expect(warningsOf(graph)).to.deep.equal([]);
    const long = `reviewer_${'x'.repeat(60)}`;
    expect(
      warningsOf({
        initial: 'ask_user',
        states: { ask_user: state('user', ['planner']), planner: state('agent', [long], { tools: [] }), [long]: state('agent', ['ask_user'], { tools: [] }) },
      }),
    ).to.deep.equal([]);
  });

  it('lists every problem when the graph has several', () => {
    const graph = defaultGraph();
    graph.states.agent_reply!.type = 'robot';
    graph.states.ask_user = state('user', ['agent_reply', 'nowhere']);
    graph.states.use_tool = state('tool', []);
    graph.states.orphan = state('user', ['agent_reply']);
    const problems = problemsOf(graph);
    expectProblem(problems, 'states.agent_reply.type', 'agent_reply', /unknown value/);
    expectProblem(problems, 'states.ask_user.transition.next[1]', 'ask_user', /`nowhere`, which is not a state/);
    expectProblem(problems, 'states.use_tool.transition.next', 'use_tool', /no agent-type successor/);
    expect(problems).to.have.length(3);
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
    if (!result.ok) expectProblem(result.problems, 'initial', undefined, /`nowhere` is not a state/);
  });

  it('gives the warnings when the graph is well-formed and valid', () => {
    const text = `${DEFAULT_GRAPH_TEXT}\n  orphan:\n    description: never entered\n    type: user\n    transition: { next: [agent_reply] }\n`;
    const result = parseGraphText(text, 'yaml');
    expect(result.ok).to.equal(true);
    expect(result.warnings.map((w) => w.state)).to.deep.equal(['orphan']);
  });

  it('gives a problem with the line when the YAML has a syntax error', () => {
    const result = parseGraphText('initial: agent_reply\nstates: [oops\n  x: 1\n', 'yaml');
    expect(result.ok).to.equal(false);
    expect(result.warnings).to.deep.equal([]);
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
