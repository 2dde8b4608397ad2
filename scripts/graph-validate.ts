// `npm run graph:validate -- [file] [--mermaid] [--html <out.html>] [--svg <out.svg>]`: checks a
// state graph file (default config/default-graph.yaml; `.json` is read as JSON, anything else as
// YAML). A bad graph: every problem on stderr, exit 1. A good one: a summary, exit 0; `--mermaid`
// prints Mermaid text instead, `--html` also writes a standalone page drawing the graph, `--svg`
// the drawing alone as a standalone SVG file.
import { readFile, writeFile } from 'node:fs/promises';
import { basename, extname } from 'node:path';
import { parseArgs } from 'node:util';
import { formatProblem, parseGraphText, STATE_TYPES, successorsOf, toHtmlPage, toMermaid, toSvg } from '../machines/index.js';
import type { StateGraph } from '../machines/index.js';

const USAGE = 'usage: npm run graph:validate -- [file] [--mermaid] [--html <out.html>] [--svg <out.svg>]';
const DEFAULT_FILE = 'config/default-graph.yaml';

function summary(file: string, graph: StateGraph): string {
  const names = Object.keys(graph.states);
  const byType = STATE_TYPES.map((type) => `${names.filter((name) => graph.states[name]?.type === type).length} ${type}`);
  const transitions = names.reduce((sum, name) => sum + successorsOf(graph, name).length, 0);
  return [
    `${file}: valid state graph`,
    `  initial      ${graph.initial}`,
    `  states       ${names.length} (${byType.join(', ')})`,
    `  transitions  ${transitions}`,
  ].join('\n');
}

async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { mermaid: { type: 'boolean' }, html: { type: 'string' }, svg: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    });
  } catch (error) {
    console.error(`graph:validate: ${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (positionals.length > 1) {
    console.error(`graph:validate: one graph file at a time\n${USAGE}`);
    return 2;
  }
  const file = positionals[0] ?? DEFAULT_FILE;

  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    console.error(`graph:validate: cannot read ${file}: ${(error as Error).message}`);
    return 1;
  }
  const result = parseGraphText(text, extname(file).toLowerCase() === '.json' ? 'json' : 'yaml');
  if (!result.ok) {
    const count = result.problems.length;
    console.error(`${file}: ${count} problem${count === 1 ? '' : 's'} in the state graph`);
    for (const problem of result.problems) console.error(formatProblem(problem));
    return 1;
  }

  // With --mermaid, stdout carries only the diagram (so it can be piped); notes go to stderr.
  const note = values.mermaid ? console.error : console.log;
  if (values.mermaid) process.stdout.write(toMermaid(result.graph));
  else note(summary(file, result.graph));
  const drawings: Array<[string | undefined, () => string]> = [
    [values.html, () => toHtmlPage(result.graph, { title: `State graph: ${basename(file)}` })],
    [values.svg, () => `${toSvg(result.graph)}\n`],
  ];
  for (const [out, draw] of drawings) {
    if (out === undefined) continue;
    try {
      await writeFile(out, draw());
    } catch (error) {
      console.error(`graph:validate: cannot write ${out}: ${(error as Error).message}`);
      return 1;
    }
    note(`wrote ${out}`);
  }
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
