import { expect } from 'chai';
import { toHtmlPage, toMermaid, toSvg, transitionLabel, validateGraph } from '../../machines/index.js';
import type { StateGraph } from '../../machines/index.js';

function parse(raw: unknown): StateGraph {
  const result = validateGraph(raw);
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.graph;
}

const state = (type: string, next: string[], description = `a ${type} state`) => ({ description, type, transition: { next } });

const DEFAULT_GRAPH = parse({
  initial: 'agent_reply',
  states: {
    ask_user: state('user', ['agent_reply'], 'Waits for the user; then <answers> & more'),
    agent_reply: state('agent', ['ask_user', 'use_tool']),
    use_tool: state('tool', ['agent_reply']),
  },
});

const MULTI_AGENT_GRAPH = parse({
  initial: 'ask_user',
  states: {
    ask_user: state('user', ['planner']),
    planner: state('agent', ['reviewer', 'search']),
    search: state('tool', ['planner']),
    reviewer: state('agent', ['ask_user', 'reviewer_tools']),
    reviewer_tools: state('tool', ['reviewer']),
  },
});

// The planner has a user successor, so the machine never takes its edge to the reviewer.
const UNUSED_EDGE_GRAPH = parse({
  initial: 'ask_user',
  states: {
    ask_user: state('user', ['planner']),
    planner: state('agent', ['ask_user', 'reviewer']),
    reviewer: state('agent', ['ask_user']),
  },
});

describe('transitionLabel', () => {
  it('names the outcome each transition is taken for when read off the graph', () => {
    expect(transitionLabel(DEFAULT_GRAPH, 'ask_user', 'agent_reply')).to.equal('user message');
    expect(transitionLabel(DEFAULT_GRAPH, 'agent_reply', 'ask_user')).to.equal('reply');
    expect(transitionLabel(DEFAULT_GRAPH, 'agent_reply', 'use_tool')).to.equal('tool calls');
    expect(transitionLabel(DEFAULT_GRAPH, 'use_tool', 'agent_reply')).to.equal('results');
    expect(transitionLabel(MULTI_AGENT_GRAPH, 'planner', 'reviewer')).to.equal('hand-off');
  });

  it('is empty when the machine never takes the transition', () => {
    expect(transitionLabel(UNUSED_EDGE_GRAPH, 'planner', 'reviewer')).to.equal('');
  });
});

describe('toMermaid', () => {
  it('writes a stateDiagram-v2 with the initial state, every transition and a class per type when given the default graph', () => {
    const lines = toMermaid(DEFAULT_GRAPH).trimEnd().split('\n');
    expect(lines[0]).to.equal('stateDiagram-v2');
    expect(lines).to.include.members([
      '  [*] --> agent_reply',
      '  ask_user --> agent_reply : user message',
      '  agent_reply --> ask_user : reply',
      '  agent_reply --> use_tool : tool calls',
      '  use_tool --> agent_reply : results',
      '  class ask_user user',
      '  class agent_reply agent',
      '  class use_tool tool',
    ]);
    expect(lines.filter((line) => line.includes('-->'))).to.have.length(5);
  });

  it('keeps each description on one line without Mermaid syntax when it contains some', () => {
    const graph = parse({
      initial: 'agent_reply',
      states: {
        ask_user: state('user', ['agent_reply'], 'Waits; then --> goes\n#on'),
        agent_reply: state('agent', ['ask_user']),
      },
    });
    const line = toMermaid(graph).split('\n').find((l) => l.startsWith('  ask_user :'));
    expect(line).to.equal('  ask_user : (user) Waits, then → goes on');
  });
});

describe('toSvg', () => {
  it('draws one box per state and one arrow per transition when given a graph', () => {
    const svg = toSvg(MULTI_AGENT_GRAPH);
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).to.equal(true);
    expect(svg.trimEnd().endsWith('</svg>')).to.equal(true);
    const states = [...svg.matchAll(/<g class="state [^"]*" data-state="([a-z_]+)">/g)].map((m) => m[1]);
    expect(states).to.have.members(Object.keys(MULTI_AGENT_GRAPH.states));
    const edges = [...svg.matchAll(/<g class="transition[^"]*" data-from="([a-z_]+)" data-to="([a-z_]+)">/g)].map((m) => `${m[1]}>${m[2]}`);
    expect(edges).to.have.members([
      'ask_user>planner',
      'planner>reviewer',
      'planner>search',
      'search>planner',
      'reviewer>ask_user',
      'reviewer>reviewer_tools',
      'reviewer_tools>reviewer',
    ]);
    expect(svg).to.match(/<g class="initial">/);
    expect(svg).not.to.match(/NaN|Infinity|undefined/);
  });

  it('lays the initial state out in the first column when the graph starts there', () => {
    const svg = toSvg(DEFAULT_GRAPH);
    const xOf = (name: string) => Number(new RegExp(`data-state="${name}">.*?<rect x="([\\d.]+)"`).exec(svg)?.[1]);
    expect(xOf('agent_reply')).to.be.below(xOf('ask_user'));
    expect(xOf('ask_user')).to.equal(xOf('use_tool'));
  });

  it('marks the highlighted state only when one is given', () => {
    expect(toSvg(DEFAULT_GRAPH)).not.to.include('highlight');
    const svg = toSvg(DEFAULT_GRAPH, { highlight: 'use_tool' });
    expect([...svg.matchAll(/class="state [^"]*highlight" data-state="([a-z_]+)"/g)].map((m) => m[1])).to.deep.equal(['use_tool']);
  });

  it('escapes descriptions when they contain markup characters', () => {
    const svg = toSvg(DEFAULT_GRAPH);
    expect(svg).to.include('Waits for the user; then &lt;answers&gt; &amp; more');
    expect(svg).not.to.include('<answers>');
  });

  it('dashes a transition when the machine never takes it', () => {
    const svg = toSvg(UNUSED_EDGE_GRAPH);
    expect(svg).to.match(/<g class="transition unused" data-from="planner" data-to="reviewer"><path [^>]*stroke-dasharray/);
    expect(svg).to.match(/<g class="transition" data-from="planner" data-to="ask_user">/);
  });
});

describe('toHtmlPage', () => {
  it('embeds the drawing and a table of states without fetching anything when rendered', () => {
    const html = toHtmlPage(DEFAULT_GRAPH, { title: 'State graph: default-graph.yaml' });
    expect(html.startsWith('<!doctype html>')).to.equal(true);
    expect(html).to.include('<title>State graph: default-graph.yaml</title>');
    expect(html).to.include('<svg');
    expect(html).to.include('<td><code>agent_reply</code> (initial)</td>');
    expect(html).not.to.match(/<script|<link|\ssrc=|\shref=|@import/);
    expect(html.replaceAll('http://www.w3.org/2000/svg', '')).not.to.match(/https?:\/\//);
  });
});
