import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { parseGraphText, type GraphValidation } from '../machines/validate-graph.js';
import type { StateGraph } from '../machines/graph-schema.js';
import { ConfigError } from './load-config.js';

/** Reads and validates a graph file (`.json` as JSON, anything else as YAML). */
export function readGraphFile(path: string): GraphValidation {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    return { ok: false, problems: [{ path, message: `cannot read the graph file: ${(error as Error).message}` }] };
  }
  return parseGraphText(text, extname(path).toLowerCase() === '.json' ? 'json' : 'yaml');
}

/** Loads the state graph for start-up; a bad graph stops start-up with every problem listed. */
export function loadGraph(path: string): StateGraph {
  const result = readGraphFile(path);
  if (result.ok) return result.graph;
  const problems = result.problems.map((problem) => `  ${problem.path}${problem.state ? ` [state ${problem.state}]` : ''}: ${problem.message}`);
  throw new ConfigError(`state.graph_path: the graph ${path} is invalid:\n${problems.join('\n')}`);
}
