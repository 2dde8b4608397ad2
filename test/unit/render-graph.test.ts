import { expect } from 'chai';
import { graphEdges, toHtmlPage, toMermaid, toSvg, transitionLabel, validateGraph } from '../../machines/index.js';
import type { StateGraph } from '../../machines/index.js';

function parse(raw: unknown): StateGraph {
  const result = validateGraph(raw);
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.graph;
}

const state = (type: string, next: string[], description = `a ${type} state`, extra: Record<string, unknown> = {}) => ({
  description,
  type,
  transition: { next },
  ...extra,
});

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

// A user message always goes to the agent successor, so the machine never takes ask_user → use_tool.
const UNUSED_EDGE_GRAPH = parse({
  initial: 'agent_reply',
  states: {
    ask_user: state('user', ['agent_reply', 'use_tool']),
    agent_reply: state('agent', ['ask_user', 'use_tool']),
    use_tool: state('tool', ['agent_reply']),
  },
});

// The triage agent's model hands over to billing or support with a transfer_to_ call.
const TRIAGE_GRAPH = parse({
  initial: 'ask_user',
  states: {
    ask_user: state('user', ['triage']),
    triage: state('agent', ['ask_user', 'billing', 'support'], 'routes', { show_output: true }),
    billing: state('agent', ['ask_user', 'billing_tools']),
    billing_tools: state('tool', ['billing'], 'runs billing tools', { require_approval: ['payments__refund', 'payments__void'] }),
    support: state('agent', ['ask_user']),
  },
});

/** The `<g class="transition…">` element of the edge from → to in an SVG drawing. */
function edgeElement(svg: string, from: string, to: string): string {
  const element = new RegExp(`<g class="transition[^"]*" data-from="${from}" data-to="${to}">.*?</g>`).exec(svg)?.[0];
  if (element === undefined) throw new Error(`no edge ${from} → ${to} in the drawing`);
  return element;
}

describe('transitionLabel', () => {
  it('names the outcome each transition is taken for when read off the graph', () => {
    expect(transitionLabel(DEFAULT_GRAPH, 'ask_user', 'agent_reply')).to.equal('user message');
    expect(transitionLabel(DEFAULT_GRAPH, 'agent_reply', 'ask_user')).to.equal('reply');
    expect(transitionLabel(DEFAULT_GRAPH, 'agent_reply', 'use_tool')).to.equal('tool calls');
    expect(transitionLabel(DEFAULT_GRAPH, 'use_tool', 'agent_reply')).to.equal('results');
    expect(transitionLabel(MULTI_AGENT_GRAPH, 'planner', 'reviewer')).to.equal('hand-off');
  });

  it('names the transfer_to_ tool when the model chooses the hand-off', () => {
    expect(transitionLabel(TRIAGE_GRAPH, 'triage', 'billing')).to.equal('transfer_to_billing');
    expect(transitionLabel(TRIAGE_GRAPH, 'triage', 'support')).to.equal('transfer_to_support');
    expect(transitionLabel(TRIAGE_GRAPH, 'triage', 'ask_user')).to.equal('reply');
  });

  it('is empty when the machine never takes the transition', () => {
    expect(transitionLabel(UNUSED_EDGE_GRAPH, 'ask_user', 'use_tool')).to.equal('');
  });
});

describe('graphEdges', () => {
  it('adds an error edge to the resting state when a reachable agent or tool state has no transition there', () => {
    expect(graphEdges(DEFAULT_GRAPH)).to.deep.equal([
      { from: 'ask_user', to: 'agent_reply', label: 'user message', isError: false },
      { from: 'agent_reply', to: 'ask_user', label: 'reply', isError: true },
      { from: 'agent_reply', to: 'use_tool', label: 'tool calls', isError: false },
      { from: 'use_tool', to: 'agent_reply', label: 'results', isError: false },
      { from: 'use_tool', to: 'ask_user', label: '', isError: true },
    ]);
  });

  it('leads every agent and tool state\'s error edge to its nearest user state when the graph has several agents', () => {
    const errors = graphEdges(MULTI_AGENT_GRAPH).filter((edge) => edge.isError).map((edge) => `${edge.from}>${edge.to}`);
    expect(errors).to.have.members(['planner>ask_user', 'search>ask_user', 'reviewer>ask_user', 'reviewer_tools>ask_user']);
  });

  it('draws no error edge from a state the initial state does not reach', () => {
    const graph = parse({
      initial: 'agent_reply',
      states: {
        ask_user: state('user', ['agent_reply']),
        agent_reply: state('agent', ['ask_user']),
        orphan: state('agent', ['ask_user']),
      },
    });
    expect(graphEdges(graph).filter((edge) => edge.from === 'orphan')).to.deep.equal([{ from: 'orphan', to: 'ask_user', label: 'reply', isError: false }]);
  });
});

describe('toMermaid', () => {
  it('writes a stateDiagram-v2 with the initial state, every transition and a class per type when given the default graph', () => {
    const lines = toMermaid(DEFAULT_GRAPH).trimEnd().split('\n');
    expect(lines[0]).to.equal('stateDiagram-v2');
    expect(lines).to.include.members([
      '  [*] --> agent_reply',
      '  ask_user --> agent_reply : user message',
      '  agent_reply --> ask_user : reply · error',
      '  agent_reply --> use_tool : tool calls',
      '  use_tool --> agent_reply : results',
      '  use_tool --> ask_user : error',
      '  class ask_user user',
      '  class agent_reply agent',
      '  class use_tool tool',
    ]);
    expect(lines.filter((line) => line.includes('-->'))).to.have.length(6);
  });

  it('labels a hand-off the model chooses with its transfer_to_ tool when an agent state has several agent successors', () => {
    const lines = toMermaid(TRIAGE_GRAPH).split('\n');
    expect(lines).to.include.members([
      '  triage --> billing : transfer_to_billing',
      '  triage --> support : transfer_to_support',
      '  billing_tools --> ask_user : error',
    ]);
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
      'planner>ask_user',
      'search>ask_user',
      'reviewer_tools>ask_user',
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

  it('dashes a transition grey when the machine never takes it', () => {
    const svg = toSvg(UNUSED_EDGE_GRAPH);
    const unused = edgeElement(svg, 'ask_user', 'use_tool');
    expect(unused).to.match(/^<g class="transition unused" [^>]*><path [^>]*stroke="#5f6368"[^>]*stroke-dasharray/);
    expect(unused).not.to.include('<text');
    expect(edgeElement(svg, 'ask_user', 'agent_reply')).to.match(/^<g class="transition" [^>]*><path (?![^>]*stroke-dasharray)/);
  });

  it('draws an error edge dashed red with an error label when a failed call takes a way no transition covers', () => {
    const svg = toSvg(DEFAULT_GRAPH);
    const error = edgeElement(svg, 'use_tool', 'ask_user');
    expect(error).to.match(/^<g class="transition error" [^>]*><path [^>]*stroke="#c5221f"[^>]*stroke-dasharray="6 4" marker-end="url\(#state-graph-arrow-error\)"/);
    expect(error).to.match(/<text class="label"[^>]*><tspan class="error-label" fill="#c5221f">error<\/tspan><\/text>/);
    expect(svg).to.include('<marker id="state-graph-arrow-error"');
    expect(svg).not.to.match(/NaN|Infinity|undefined/);
  });

  it('widens the drawing to fit the label when an error edge runs within the last column', () => {
    const svg = toSvg(DEFAULT_GRAPH);
    const width = Number(/viewBox="0 0 ([\d.]+) /.exec(svg)?.[1]);
    const labelX = Number(/<text class="label" x="([\d.]+)"[^>]*text-anchor="start"><tspan class="error-label"/.exec(edgeElement(svg, 'use_tool', 'ask_user'))?.[1]);
    expect(labelX).to.be.above(0);
    expect(width).to.be.at.least(labelX + 'error'.length * 7);
  });

  it('keeps the labels apart when several edges into one state skip columns backwards', () => {
    const labels = [...toSvg(MULTI_AGENT_GRAPH).matchAll(/<text class="label" x="([\d.]+)" y="([\d.]+)" text-anchor="(\w+)">(.*?)<\/text>/g)].map((m) => {
      const width = m[4]!.replace(/<[^>]+>/g, '').length * 7;
      const left = m[3] === 'middle' ? Number(m[1]) - width / 2 : Number(m[1]);
      return { text: m[4], left, right: left + width, top: Number(m[2]) - 12, bottom: Number(m[2]) + 2 };
    });
    for (const [i, a] of labels.entries()) {
      for (const b of labels.slice(i + 1)) {
        const overlap = a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
        expect(overlap, `labels ${a.text} and ${b.text} overlap`).to.equal(false);
      }
    }
  });

  it('gives one solid edge with both labels when a failed call takes the way of a transition', () => {
    const reply = edgeElement(toSvg(DEFAULT_GRAPH), 'agent_reply', 'ask_user');
    expect(reply).to.match(/^<g class="transition" [^>]*><path (?![^>]*stroke-dasharray)[^>]*stroke="#5f6368"/);
    expect(reply).to.include('>reply · <tspan class="error-label" fill="#c5221f">error</tspan></text>');
  });

  it('labels a hand-off the model chooses with its transfer_to_ tool when drawn', () => {
    const svg = toSvg(TRIAGE_GRAPH);
    expect(edgeElement(svg, 'triage', 'billing')).to.include('>transfer_to_billing</text>');
    expect(edgeElement(svg, 'triage', 'support')).to.include('>transfer_to_support</text>');
    expect(edgeElement(svg, 'billing', 'billing_tools')).to.include('>tool calls</text>');
  });
});

describe('toHtmlPage', () => {
  it('embeds the drawing and a table of states without fetching anything when rendered', () => {
    const html = toHtmlPage(DEFAULT_GRAPH, { title: 'State graph: default-graph.yaml' });
    expect(html.startsWith('<!doctype html>')).to.equal(true);
    expect(html).to.include('<title>State graph: default-graph.yaml</title>');
    expect(html).to.include('<svg');
    expect(html).to.include('<td><code>agent_reply</code> (initial)</td>');
    expect(html).to.include('<th>settings</th>');
    expect(html).to.include('data-from="use_tool" data-to="ask_user"');
    expect(html).not.to.match(/<script|<link|\ssrc=|\shref=|@import/);
    expect(html.replaceAll('http://www.w3.org/2000/svg', '')).not.to.match(/https?:\/\//);
  });

  it('shows show_output and require_approval in the table when states set them', () => {
    const html = toHtmlPage(TRIAGE_GRAPH);
    const row = (name: string) => new RegExp(`<tr><td><code>${name}</code>.*?</tr>`).exec(html)?.[0] ?? '';
    expect(row('triage')).to.match(/<td><code>show_output: true<\/code><\/td><\/tr>$/);
    expect(row('billing_tools')).to.match(/<td><code>require_approval: \[payments__refund, payments__void\]<\/code><\/td><\/tr>$/);
    expect(row('billing')).to.match(/<td><\/td><\/tr>$/);
  });
});
