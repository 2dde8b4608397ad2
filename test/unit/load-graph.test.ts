import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { loadGraph } from '../../config/load-graph.js';
import { ConfigError } from '../../config/load-config.js';

const GRAPH = `initial: agent_reply
states:
  ask_user: { description: waits, type: user, transition: { next: [agent_reply] } }
  agent_reply: { description: replies, type: agent, tools: [], transition: { next: [ask_user] } }
`;
const ORPHAN = '  orphan: { description: never entered, type: user, transition: { next: [agent_reply] } }\n';

describe('loadGraph', () => {
  let dir: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'load-graph-'));
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('gives the graph with its warnings when the graph is valid but has some', async () => {
    const file = join(dir, 'orphan.yaml');
    await writeFile(file, GRAPH + ORPHAN);
    const { graph, warnings } = loadGraph(file);
    expect(Object.keys(graph.states)).to.deep.equal(['ask_user', 'agent_reply', 'orphan']);
    expect(warnings).to.have.length(1);
    expect(warnings[0]).to.include({ path: 'states.orphan', state: 'orphan' });
  });

  it('gives no warnings when the graph has none', async () => {
    const file = join(dir, 'plain.yaml');
    await writeFile(file, GRAPH);
    expect(loadGraph(file).warnings).to.deep.equal([]);
  });

  it('throws a ConfigError listing every problem when the graph is invalid', async () => {
    const file = join(dir, 'bad.yaml');
    await writeFile(file, GRAPH.replace('next: [ask_user]', 'next: [ask_usr]'));
    expect(() => loadGraph(file)).to.throw(ConfigError, /the graph .*bad\.yaml is invalid:\n {2}states\.agent_reply\.transition\.next\[0\] \[state agent_reply\]: .*Did you mean `ask_user`\?/);
  });

  it('throws a ConfigError when the file cannot be read', () => {
    expect(() => loadGraph(join(dir, 'missing.yaml'))).to.throw(ConfigError, /cannot read the graph file/);
  });
});
