// `svc-agent graph validate [file] [--mermaid] [--html <out.html>] [--svg <out.svg>]` (in a
// checkout also `npm run graph:validate -- …`): checks a state graph file (default
// config/default-graph.yaml; `.json` is read as JSON, anything else as YAML). A bad graph:
// every problem on stderr, exit 1. A good one: a summary, exit 0; `--mermaid` prints Mermaid
// text instead, `--html` also writes a standalone page drawing the graph, `--svg` the drawing
// alone as a standalone SVG file. Warnings (a graph that runs, but likely not as meant) go to
// stderr either way and do not change the exit code.
import { readFile, writeFile } from 'node:fs/promises';
import { basename, extname } from 'node:path';
import { parseArgs } from 'node:util';
import { resolveConfiguredFile } from '../config/package-files.js';
import { formatProblem, formatWarning, parseGraphText, routesOf, STATE_TYPES, successorsOf, toHtmlPage, toMermaid, toSvg } from '../machines/index.js';
import type { GraphProblem, StateGraph } from '../machines/index.js';

const USAGE = `usage: svc-agent graph validate [FILE] [--mermaid] [--html OUT] [--svg OUT]
       (in a checkout also: npm run graph:validate -- [FILE] [--mermaid] [--html OUT] [--svg OUT])`;
const HELP = `${USAGE}
Checks a state graph file (default config/default-graph.yaml: the working directory's, else the
bundled one). A bad graph: every problem on stderr, exit 1. --mermaid prints the graph as Mermaid
text; --html and --svg draw it into the file OUT.`;
const NAME = 'svc-agent graph validate';
const DEFAULT_FILE = 'config/default-graph.yaml';

/** The hand-offs between agent states, by state: the model's `transfer_to_` choices and plain hand-offs. */
function handoffs(graph: StateGraph): string {
  const groups = Object.keys(graph.states).flatMap((name) => {
    const routes = routesOf(graph, name);
    const targets = [...routes.handoffs, ...(routes.reply !== undefined && graph.states[routes.reply]?.type === 'agent' ? [routes.reply] : [])];
    return targets.length === 0 ? [] : [{ name, targets }];
  });
  const total = groups.reduce((sum, { targets }) => sum + targets.length, 0);
  return total === 0 ? '0' : `${total} (${groups.map(({ name, targets }) => `${name} → ${targets.join(', ')}`).join('; ')})`;
}

function summary(file: string, graph: StateGraph): string {
  const names = Object.keys(graph.states);
  const byType = STATE_TYPES.map((type) => `${names.filter((name) => graph.states[name]?.type === type).length} ${type}`);
  const transitions = names.reduce((sum, name) => sum + successorsOf(graph, name).length, 0);
  return [
    `${file}: valid state graph`,
    `  initial      ${graph.initial}`,
    `  states       ${names.length} (${byType.join(', ')})`,
    `  transitions  ${transitions}`,
    `  hand-offs    ${handoffs(graph)}`,
  ].join('\n');
}

const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;

function printWarnings(file: string, warnings: GraphProblem[]): void {
  if (warnings.length === 0) return;
  console.error(`${file}: ${plural(warnings.length, 'warning')}`);
  for (const warning of warnings) console.error(formatWarning(warning));
}

/** Runs `svc-agent graph validate` with its arguments; resolves to the exit code. */
export async function runGraphValidate(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { mermaid: { type: 'boolean' }, html: { type: 'string' }, svg: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    });
  } catch (error) {
    console.error(`${NAME}: ${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  if (positionals.length > 1) {
    console.error(`${NAME}: one graph file at a time\n${USAGE}`);
    return 2;
  }
  const file = positionals[0] ?? DEFAULT_FILE;

  let text: string;
  try {
    text = await readFile(resolveConfiguredFile(file), 'utf8');
  } catch (error) {
    console.error(`${NAME}: cannot read ${file}: ${(error as Error).message}`);
    return 1;
  }
  const result = parseGraphText(text, extname(file).toLowerCase() === '.json' ? 'json' : 'yaml');
  if (!result.ok) {
    console.error(`${file}: ${plural(result.problems.length, 'problem')} in the state graph`);
    for (const problem of result.problems) console.error(formatProblem(problem));
    printWarnings(file, result.warnings);
    return 1;
  }

  // With --mermaid, stdout carries only the diagram (so it can be piped); notes go to stderr.
  const note = values.mermaid ? console.error : console.log;
  if (values.mermaid) process.stdout.write(toMermaid(result.graph));
  else note(summary(file, result.graph));
  printWarnings(file, result.warnings);
  const drawings: Array<[string | undefined, () => string]> = [
    [values.html, () => toHtmlPage(result.graph, { title: `State graph: ${basename(file)}` })],
    [values.svg, () => `${toSvg(result.graph)}\n`],
  ];
  for (const [out, draw] of drawings) {
    if (out === undefined) continue;
    try {
      await writeFile(out, draw());
    } catch (error) {
      console.error(`${NAME}: cannot write ${out}: ${(error as Error).message}`);
      return 1;
    }
    note(`wrote ${out}`);
  }
  return 0;
}
