import { parseDocument } from 'yaml';
import type { z } from 'zod';
import { checkGraphRules } from './check-graph-rules.js';
import { closestName } from './closest-name.js';
import { problemAt, ROOT_PATH } from './graph-problem.js';
import type { GraphProblem } from './graph-problem.js';
import { GraphStateSchema, StateGraphSchema } from './graph-schema.js';
import type { StateGraph } from './graph-schema.js';

export { formatProblem, formatWarning } from './graph-problem.js';
export type { GraphProblem } from './graph-problem.js';
export { MAX_TOOL_NAME_LENGTH } from './check-graph-rules.js';

/**
 * The outcome of validating a graph: the parsed graph, or every problem found; either way the
 * warnings (what runs, but likely not as meant, such as a state no path reaches).
 */
export type GraphValidation =
  | { ok: true; graph: StateGraph; warnings: GraphProblem[] }
  | { ok: false; problems: GraphProblem[]; warnings: GraphProblem[] };

/** The text formats a graph file can be written in. */
export type GraphFormat = 'yaml' | 'json';

/** Checks a parsed graph file against the schema and the rules of the state graph, listing every problem. */
export function validateGraph(raw: unknown): GraphValidation {
  const parsed = StateGraphSchema.safeParse(raw, { error: issueMessage });
  const problems = parsed.success ? [] : parsed.error.issues.flatMap(problemsOfIssue);
  // The graph rules are checked on whatever part of the file is readable, so a schema error
  // elsewhere does not hide them.
  const { errors, warnings } = checkGraphRules(raw);
  problems.push(...errors);
  if (parsed.success && problems.length === 0) return { ok: true, graph: parsed.data, warnings };
  return { ok: false, problems, warnings };
}

/** Parses graph file text (YAML or JSON) and validates it; a syntax error is a problem too. */
export function parseGraphText(text: string, format: GraphFormat): GraphValidation {
  const parsed = format === 'json' ? parseJson(text) : parseYaml(text);
  return 'problems' in parsed ? { ok: false, problems: parsed.problems, warnings: [] } : validateGraph(parsed.value);
}

type Parsed = { value: unknown } | { problems: GraphProblem[] };

function parseYaml(text: string): Parsed {
  const doc = parseDocument(text);
  if (doc.errors.length === 0) return { value: doc.toJS() };
  // The yaml package's message is "<what> at line L, column C:" followed by an excerpt.
  const problems = doc.errors.map((error) => ({
    path: ROOT_PATH,
    message: `YAML syntax error: ${(error.message.split('\n')[0] ?? '').replace(/:$/, '')}`,
  }));
  return { problems };
}

function parseJson(text: string): Parsed {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch (error) {
    const message = (error as Error).message;
    const position = /at position (\d+)/.exec(message)?.[1];
    return { problems: [{ path: ROOT_PATH, message: `JSON syntax error: ${message}${position ? lineAndColumn(text, Number(position)) : ''}` }] };
  }
}

function lineAndColumn(text: string, position: number): string {
  const lines = text.slice(0, position).split('\n');
  return ` (line ${lines.length}, column ${(lines.at(-1)?.length ?? 0) + 1})`;
}

function issueMessage(issue: z.core.$ZodRawIssue): string | undefined {
  if (issue.code === 'invalid_type' && issue.input === undefined) return `is required (${issue.expected})`;
  if (issue.code === 'invalid_value') {
    return `unknown value ${JSON.stringify(issue.input)}; expected one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
  }
  return undefined;
}

function problemsOfIssue(issue: z.core.$ZodIssue): GraphProblem[] {
  if (issue.code === 'unrecognized_keys') return issue.keys.map((key) => problemAt([...issue.path, key], unknownFieldMessage(issue.path, key)));
  return [problemAt(issue.path, issue.message)];
}

/** The fields the schema allows where an unknown one was found: the file's, a state's, or a transition's. */
function fieldsAt(path: readonly PropertyKey[]): string[] {
  if (path.length === 0) return Object.keys(StateGraphSchema.shape);
  if (path.length === 2) return Object.keys(GraphStateSchema.shape);
  return path.at(-1) === 'transition' ? ['next'] : [];
}

function unknownFieldMessage(path: readonly PropertyKey[], key: string): string {
  const fields = fieldsAt(path);
  const suggestion = closestName(key, fields);
  if (suggestion !== undefined) return `unknown field: did you mean \`${suggestion}\`?`;
  return fields.length === 0 ? 'unknown field' : `unknown field: the fields here are ${fields.join(', ')}`;
}
