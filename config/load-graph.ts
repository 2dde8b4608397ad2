import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { parseGraphText, type GraphProblem, type GraphValidation } from '../machines/validate-graph.js';
import type { StateGraph } from '../machines/graph-schema.js';
import { ConfigError } from './load-config.js';
import { resolveConfiguredFile } from './package-files.js';

/** Reads and validates a graph file (`.json` as JSON, anything else as YAML). */
export function readGraphFile(path: string): GraphValidation {
  let text: string;
  try {
    text = readFileSync(resolveConfiguredFile(path), 'utf8');
  } catch (error) {
    return { ok: false, problems: [{ path, message: `cannot read the graph file: ${(error as Error).message}` }], warnings: [] };
  }
  return parseGraphText(text, extname(path).toLowerCase() === '.json' ? 'json' : 'yaml');
}

/** A graph loaded for start-up and what it runs with but likely not as meant (for the log; see `formatWarning`). */
export type LoadedGraph = { graph: StateGraph; warnings: GraphProblem[] };

/** Loads the state graph and its warnings for start-up; a bad graph stops start-up with every problem listed. */
export function loadGraph(path: string): LoadedGraph {
  const result = readGraphFile(path);
  if (result.ok) return { graph: result.graph, warnings: result.warnings };
  const problems = result.problems.map((problem) => `  ${problem.path}${problem.state ? ` [state ${problem.state}]` : ''}: ${problem.message}`);
  throw new ConfigError(`state.graph_path: the graph ${path} is invalid:\n${problems.join('\n')}`);
}

