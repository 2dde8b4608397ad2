/** One thing wrong with a graph file: where (a dotted path, `(root)` for the whole file), which state, and what. */
export type GraphProblem = { path: string; state?: string; message: string };

/** The path of a problem about the whole file. */
export const ROOT_PATH = '(root)';

/** A zod-style path (`['states', 'a', 'transition', 'next', 1]`) as text (`states.a.transition.next[1]`). */
export function pathText(path: readonly PropertyKey[]): string {
  if (path.length === 0) return ROOT_PATH;
  return path.map((key, i) => (typeof key === 'number' ? `[${key}]` : `${i === 0 ? '' : '.'}${String(key)}`)).join('');
}

/** A problem at `path`; one under `states.<name>` names that state. */
export function problemAt(path: readonly PropertyKey[], message: string): GraphProblem {
  const state = path[0] === 'states' && typeof path[1] === 'string' ? path[1] : undefined;
  return state === undefined ? { path: pathText(path), message } : { path: pathText(path), state, message };
}

/** One problem as a line of a report: `  <path>  state <name>  <message>` (the state part when there is one). */
export function formatProblem(problem: GraphProblem): string {
  return `  ${problem.path}${problem.state === undefined ? '' : `  state ${problem.state}`}  ${problem.message}`;
}

/** One warning as a line of a report: `formatProblem`'s line marked `warning:`. */
export function formatWarning(problem: GraphProblem): string {
  return `  warning: ${formatProblem(problem).trimStart()}`;
}
