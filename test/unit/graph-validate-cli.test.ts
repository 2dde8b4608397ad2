import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { ensureBuilt } from '../../scripts/build.mjs';
import { runToExit, type ProgramRun } from '../support/run-to-exit.js';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));


/** Runs `svc-agent graph validate <args>` as `npm run graph:validate -- <args>` does, from the repository root. */
function runCli(args: string[]): Promise<ProgramRun> {
  return runToExit(process.execPath, ['scripts/svc-agent.mjs', 'graph', 'validate', ...args], { cwd: REPO_ROOT });
}

const GOOD_JSON = {
  initial: 'ask_user',
  states: {
    ask_user: { description: 'waits', type: 'user', transition: { next: ['planner'] } },
    planner: { description: 'plans', type: 'agent', transition: { next: ['reviewer'] } },
    reviewer: { description: 'reviews', type: 'agent', transition: { next: ['ask_user'] } },
  },
};

const TRIAGE_YAML = `initial: ask_user
states:
  ask_user: { description: waits, type: user, transition: { next: [triage] } }
  triage: { description: routes, type: agent, transition: { next: [ask_user, billing, support] } }
  billing: { description: bills, type: agent, transition: { next: [ask_user] } }
  support: { description: helps, type: agent, transition: { next: [ask_user] } }
`;

/** The default graph with a user state no path reaches: valid, with one warning. */
const ORPHAN_YAML = `initial: agent_reply
states:
  ask_user: { description: waits, type: user, transition: { next: [agent_reply] } }
  agent_reply: { description: replies, type: agent, transition: { next: [ask_user, use_tool] } }
  use_tool: { description: runs tools, type: tool, transition: { next: [agent_reply] } }
  orphan: { description: never entered, type: user, transition: { next: [agent_reply] } }
`;

const BAD_YAML = `initial: agent_reply
states:
  ask_user:
    description: waits
    type: user
    transition: { next: [agent_reply] }
  agent_reply:
    description: replies
    type: agent
    transition: { next: [ask_user, use_tool] }
  use_tool:
    description: runs tools
    type: robot
    transition: { next: [agent_reply, nowhere] }
`;

describe('svc-agent graph validate', () => {
  let dir: string;

  before(async function () {
    // The command runs the compiled sources: the first run after a change compiles them (about 10 s on two cores).
    this.timeout(120_000);
    ensureBuilt();
    dir = await mkdtemp(join(tmpdir(), 'graph-validate-'));
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('prints a summary and exits 0 when the default graph is checked', async () => {
    const run = await runCli([]);
    expect(run.code).to.equal(0);
    expect(run.stdout).to.include('config/default-graph.yaml: valid state graph');
    expect(run.stdout).to.match(/initial\s+agent_reply/);
    expect(run.stdout).to.match(/states\s+3 \(1 user, 1 agent, 1 tool\)/);
    expect(run.stdout).to.match(/transitions\s+4/);
    expect(run.stdout).to.match(/\n {2}hand-offs {4}0\n/);
    expect(run.stderr).to.equal('');
  });

  it('counts the hand-offs the model chooses among in the summary when an agent state has several', async () => {
    const file = join(dir, 'triage.yaml');
    await writeFile(file, TRIAGE_YAML);
    const run = await runCli([file]);
    expect(run.code).to.equal(0);
    expect(run.stdout).to.include('\n  hand-offs    2 (triage → billing, support)\n');
  });

  it('prints the warnings on stderr after the summary and exits 0 when the graph only has warnings', async () => {
    const file = join(dir, 'orphan.yaml');
    await writeFile(file, ORPHAN_YAML);
    const run = await runCli([file]);
    expect(run.code).to.equal(0);
    expect(run.stdout).to.include(`${file}: valid state graph`);
    const lines = run.stderr.trimEnd().split('\n');
    expect(lines[0]).to.equal(`${file}: 1 warning`);
    expect(lines[1]).to.match(/^ {2}warning: states\.orphan {2}state orphan {2}user state `orphan` is unreachable: .* Add it to some state's transition\.next, or remove it\.$/);
    expect(lines).to.have.length(2);
  });

  it('prints the warnings on stderr and only Mermaid text on stdout when --mermaid is given', async () => {
    const file = join(dir, 'orphan-mermaid.yaml');
    await writeFile(file, ORPHAN_YAML);
    const run = await runCli([file, '--mermaid']);
    expect(run.code).to.equal(0);
    expect(run.stdout.startsWith('stateDiagram-v2\n')).to.equal(true);
    expect(run.stdout).not.to.include('warning');
    expect(run.stderr).to.match(/^ {2}warning: states\.orphan /m);
  });

  it('prints the warnings after the problems and exits 1 when the graph has both', async () => {
    const file = join(dir, 'both.yaml');
    await writeFile(file, ORPHAN_YAML.replace('next: [ask_user, use_tool]', 'next: [ask_user, use_tool, ask_user_again]'));
    const run = await runCli([file]);
    expect(run.code).to.equal(1);
    expect(run.stdout).to.equal('');
    const lines = run.stderr.trimEnd().split('\n');
    expect(lines[0]).to.equal(`${file}: 1 problem in the state graph`);
    expect(lines[1]).to.match(/^ {2}states\.agent_reply\.transition\.next\[2\] {2}state agent_reply {2}agent state `agent_reply` has a transition to `ask_user_again`/);
    expect(lines[2]).to.equal(`${file}: 1 warning`);
    expect(lines[3]).to.match(/^ {2}warning: states\.orphan /);
    expect(lines).to.have.length(4);
  });

  it('lists every problem on stderr and exits 1 when the graph is bad', async () => {
    const file = join(dir, 'bad.yaml');
    await writeFile(file, BAD_YAML);
    const run = await runCli([file]);
    expect(run.code).to.equal(1);
    expect(run.stdout).to.equal('');
    const lines = run.stderr.trimEnd().split('\n');
    expect(lines[0]).to.equal(`${file}: 2 problems in the state graph`);
    expect(lines[1]).to.match(/^ {2}states\.use_tool\.type {2}state use_tool {2}unknown value "robot"/);
    expect(lines[2]).to.match(/^ {2}states\.use_tool\.transition\.next\[1\] {2}state use_tool {2}state `use_tool` has a transition to `nowhere`, which is not a state of the graph/);
    expect(lines).to.have.length(3);
  });

  it('reads the file as JSON when its name ends in .json', async () => {
    const file = join(dir, 'planner.json');
    await writeFile(file, JSON.stringify(GOOD_JSON));
    const run = await runCli([file]);
    expect(run.code).to.equal(0);
    expect(run.stdout).to.match(/states\s+3 \(1 user, 2 agent, 0 tool\)/);
    expect(run.stdout).to.include('\n  hand-offs    1 (planner → reviewer)\n');
  });

  it('reports a syntax error and exits 1 when a .json file is not JSON', async () => {
    const file = join(dir, 'yaml-in-disguise.json');
    await writeFile(file, 'initial: ask_user\n');
    const run = await runCli([file]);
    expect(run.code).to.equal(1);
    expect(run.stderr).to.match(/^ {2}\(root\) {2}JSON syntax error: /m);
  });

  it('reports a syntax error and exits 1 when the YAML is malformed', async () => {
    const file = join(dir, 'broken.yaml');
    await writeFile(file, 'initial: agent_reply\nstates: [unclosed\n');
    const run = await runCli([file]);
    expect(run.code).to.equal(1);
    expect(run.stderr).to.match(/^ {2}\(root\) {2}YAML syntax error: .*line \d+, column \d+/m);
  });

  it('prints only Mermaid text on stdout when --mermaid is given', async () => {
    const run = await runCli(['--mermaid']);
    expect(run.code).to.equal(0);
    expect(run.stdout.startsWith('stateDiagram-v2\n')).to.equal(true);
    expect(run.stdout).to.include('  agent_reply --> use_tool : tool calls');
    expect(run.stdout).to.include('  use_tool --> ask_user : error');
    expect(run.stdout).not.to.include('valid state graph');
  });

  it('writes a standalone HTML drawing when --html is given', async () => {
    const out = join(dir, 'graph.html');
    const run = await runCli(['config/default-graph.yaml', '--html', out]);
    expect(run.code).to.equal(0);
    expect(run.stdout).to.include(`wrote ${out}`);
    const html = await readFile(out, 'utf8');
    expect(html).to.match(/^<!doctype html>/);
    expect(html).to.include('data-state="agent_reply"');
    expect(html).to.include('<th>settings</th>');
  });

  it('writes the drawing alone as a standalone SVG file when --svg is given', async () => {
    const out = join(dir, 'graph.svg');
    const run = await runCli(['--svg', out]);
    expect(run.code).to.equal(0);
    expect(run.stdout).to.include('config/default-graph.yaml: valid state graph');
    expect(run.stdout).to.include(`wrote ${out}`);
    const svg = await readFile(out, 'utf8');
    expect(svg).to.match(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" /);
    expect(svg.trimEnd().endsWith('</svg>')).to.equal(true);
    for (const state of ['ask_user', 'agent_reply', 'use_tool']) expect(svg).to.include(`data-state="${state}"`);
    expect(svg).to.include('<g class="transition error" data-from="use_tool" data-to="ask_user">');
  });

  it('keeps stdout to the Mermaid text when --mermaid and --svg are given together', async () => {
    const out = join(dir, 'piped.svg');
    const run = await runCli(['--mermaid', '--svg', out]);
    expect(run.code).to.equal(0);
    expect(run.stdout.startsWith('stateDiagram-v2\n')).to.equal(true);
    expect(run.stdout).not.to.include('wrote');
    expect(run.stderr).to.include(`wrote ${out}`);
    expect(await readFile(out, 'utf8')).to.match(/^<svg /);
  });

  it('exits 1 when the SVG file cannot be written', async () => {
    const out = join(dir, 'no-such-folder', 'graph.svg');
    const run = await runCli(['--svg', out]);
    expect(run.code).to.equal(1);
    expect(run.stderr).to.include(`cannot write ${out}`);
  });

  it('exits 1 when the file cannot be read', async () => {
    const run = await runCli([join(dir, 'missing.yaml')]);
    expect(run.code).to.equal(1);
    expect(run.stderr).to.include('cannot read');
  });

  it('prints usage and exits 2 when given an unknown option', async () => {
    const run = await runCli(['--nope']);
    expect(run.code).to.equal(2);
    expect(run.stderr).to.include('usage: svc-agent graph validate [FILE]');
    expect(run.stderr).to.include('npm run graph:validate -- [FILE]');
  });
});
