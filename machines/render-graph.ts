import { graphEdges } from './graph-edges.js';
import type { GraphEdge } from './graph-edges.js';
import { successorsOf } from './graph-routes.js';
import type { GraphState, StateGraph, StateType } from './graph-schema.js';

/** Options of `toSvg`: the state to draw highlighted (the one a session is in). */
export type SvgOptions = { highlight?: string };

/** Options of `toHtmlPage`: the page title. */
export type HtmlPageOptions = { title?: string };

const COLOURS: Record<StateType, { fill: string; stroke: string }> = {
  user: { fill: '#e8f0fe', stroke: '#3367d6' },
  agent: { fill: '#e6f4ea', stroke: '#188038' },
  tool: { fill: '#fef7e0', stroke: '#b06000' },
};

const ERROR_COLOUR = '#c5221f';

/** The text of an edge's label: what it is taken for and 'error', joined by ' · '. */
function edgeText(edge: GraphEdge): string {
  return [edge.label, edge.isError ? 'error' : ''].filter(Boolean).join(' · ');
}

/** Mermaid `stateDiagram-v2` text of a graph. */
export function toMermaid(graph: StateGraph): string {
  // Mermaid reads `;` and `#` as syntax and `-->` as a transition, even in a description.
  const text = (value: string) => value.replace(/\s+/g, ' ').replace(/-->/g, '→').replace(/;/g, ',').replace(/#/g, '').trim();
  const lines = ['stateDiagram-v2', '  direction LR'];
  for (const [type, { fill, stroke }] of Object.entries(COLOURS)) lines.push(`  classDef ${type} fill:${fill},stroke:${stroke}`);
  lines.push(`  [*] --> ${graph.initial}`);
  for (const [name, state] of Object.entries(graph.states)) {
    lines.push(`  ${name} : ${text(`(${state.type}) ${state.description}`)}`);
  }
  for (const edge of graphEdges(graph)) {
    const label = edgeText(edge);
    lines.push(`  ${edge.from} --> ${edge.to}${label ? ` : ${label}` : ''}`);
  }
  for (const type of Object.keys(COLOURS)) {
    const names = Object.keys(graph.states).filter((name) => graph.states[name]?.type === type);
    if (names.length > 0) lines.push(`  class ${names.join(',')} ${type}`);
  }
  return `${lines.join('\n')}\n`;
}

/** Escapes text for XML and HTML content and attribute values. */
export function escapeXml(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

type Box = { x: number; y: number; w: number; h: number };
type Point = { x: number; y: number };

/** How a transition is drawn: to a later column, to an earlier one, within its column, or to itself. */
type Route = 'forward' | 'back' | 'column' | 'self';

/** One end of a drawn transition, on a side of a state's box (edge -1 is the initial-state arrow). */
type EdgeEnd = { node: string; side: 'left' | 'right'; edge: number; end: 'from' | 'to'; other: string; route: Route };

const NODE_H = 52;
const GAP_X = 120;
const GAP_Y = 56;
const MARGIN = 72;
/** How much lower than other transitions an error edge that skips columns backwards swings. */
const ERROR_SWING = 28;
/** About the width of a character of a 12px label, to make room for one. */
const LABEL_CHAR_W = 7;
const ROUTE_ORDER: Record<Route, number> = { forward: 0, column: 1, back: 2, self: 3 };

/** Columns by breadth-first distance from the initial state (states it cannot reach last), each ordered after its parents. */
function layers(graph: StateGraph): string[][] {
  const depth = new Map<string, number>();
  if (Object.hasOwn(graph.states, graph.initial)) depth.set(graph.initial, 0);
  // A Map's iteration also visits the entries added during it: this is a breadth-first walk.
  for (const [name, d] of depth) {
    for (const next of successorsOf(graph, name)) if (!depth.has(next)) depth.set(next, d + 1);
  }
  const last = Math.max(-1, ...depth.values()) + 1;
  const columns: string[][] = [];
  for (const name of Object.keys(graph.states)) (columns[depth.get(name) ?? last] ??= []).push(name);
  const filled = columns.filter((column) => column.length > 0);
  // Ordering a column by the mean row of its parents in the column before uncrosses most edges.
  for (let c = 1; c < filled.length; c++) {
    const previous = filled[c - 1]!;
    const rank = (name: string): number => {
      const rows = previous.flatMap((parent, row) => (successorsOf(graph, parent).includes(name) ? [row] : []));
      return rows.length === 0 ? Number.MAX_SAFE_INTEGER : rows.reduce((sum, row) => sum + row, 0) / rows.length;
    };
    filled[c] = filled[c]!.map((name) => ({ name, rank: rank(name) })).sort((x, y) => x.rank - y.rank).map(({ name }) => name);
  }
  return filled;
}

/** The point at `t` (0..1) of the cubic Bézier curve from `s` to `e` with control points `c1` and `c2`. */
function bezierPoint(s: Point, c1: Point, c2: Point, e: Point, t: number): Point {
  const u = 1 - t;
  const at = (a: number, b: number, c: number, d: number): number => u * u * u * a + 3 * u * u * t * b + 3 * u * t * t * c + t * t * t * d;
  return { x: at(s.x, c1.x, c2.x, e.x), y: at(s.y, c1.y, c2.y, e.y) };
}

const fmt = (n: number): string => String(Math.round(n * 10) / 10);

/** A standalone SVG drawing of a graph, laid out left to right from the initial state. */
export function toSvg(graph: StateGraph, options: SvgOptions = {}): string {
  const names = Object.keys(graph.states);
  const nodeW = Math.max(140, ...names.map((name) => name.length * 8.5 + 36));
  const columns = layers(graph);
  const columnOf = new Map(columns.flatMap((column, c) => column.map((name): [string, number] => [name, c])));
  const rows = Math.max(1, ...columns.map((column) => column.length));
  const innerH = rows * NODE_H + (rows - 1) * GAP_Y;
  const boxes = new Map<string, Box>();
  columns.forEach((column, c) => {
    const top = MARGIN + (innerH - (column.length * NODE_H + (column.length - 1) * GAP_Y)) / 2;
    column.forEach((name, r) => boxes.set(name, { x: MARGIN + c * (nodeW + GAP_X), y: top + r * (NODE_H + GAP_Y), w: nodeW, h: NODE_H }));
  });
  const boxesWidth = MARGIN * 2 + columns.length * nodeW + (columns.length - 1) * GAP_X;
  // Labels of transitions within a column start right of its curve; the drawing widens to fit them.
  let labelsRight = 0;
  const box = (name: string): Box => boxes.get(name)!;
  const centreY = (name: string): number => (name === '' ? -Infinity : box(name).y + NODE_H / 2);

  const edges = graphEdges(graph).map((edge) => {
    const span = columnOf.get(edge.to)! - columnOf.get(edge.from)!;
    const route: Route = edge.from === edge.to ? 'self' : span > 0 ? 'forward' : span < 0 ? 'back' : 'column';
    return { ...edge, route, long: Math.abs(span) > 1 };
  });
  // Error edges that skip columns backwards swing below the others, so their labels stay apart.
  const isLowErrorEdge = (edge: (typeof edges)[number]): boolean => edge.long && edge.route === 'back' && edge.isError && edge.label === '';
  const height = MARGIN * 2 + innerH + (edges.some(isLowErrorEdge) ? ERROR_SWING : 0);

  // Transitions leave and enter a box on its sides, spread along them in the order of the
  // other end's height, so that they do not cross near the box; the two directions between a
  // pair of states run side by side.
  const ends: EdgeEnd[] = edges.flatMap(({ from, to, route }, edge): EdgeEnd[] =>
    route === 'self'
      ? []
      : [
          { node: from, side: route === 'back' ? 'left' : 'right', edge, end: 'from', other: to, route },
          { node: to, side: route === 'forward' ? 'left' : 'right', edge, end: 'to', other: from, route },
        ],
  );
  if (boxes.has(graph.initial)) ends.push({ node: graph.initial, side: 'left', edge: -1, end: 'to', other: '', route: 'forward' });
  const ports = new Map<string, Point>();
  const sides = new Map<string, EdgeEnd[]>();
  for (const end of ends) sides.set(`${end.node}:${end.side}`, [...(sides.get(`${end.node}:${end.side}`) ?? []), end]);
  for (const group of sides.values()) {
    group.sort((x, y) => centreY(x.other) - centreY(y.other) || ROUTE_ORDER[x.route] - ROUTE_ORDER[y.route] || x.edge - y.edge);
    group.forEach((end, i) => {
      const b = box(end.node);
      ports.set(`${end.edge}:${end.end}`, { x: end.side === 'right' ? b.x + b.w : b.x, y: b.y + (b.h * (i + 1)) / (group.length + 1) });
    });
  }

  const drawnEdges = edges.map(({ from, to, route, long, label, isError }, edge) => {
    const isLow = isLowErrorEdge(edges[edge]!);
    let path: string;
    let at: Point;
    if (route === 'self') {
      const b = box(from);
      const cx = b.x + b.w / 2;
      path = `M ${fmt(cx - 14)} ${fmt(b.y)} C ${fmt(cx - 34)} ${fmt(b.y - 46)} ${fmt(cx + 34)} ${fmt(b.y - 46)} ${fmt(cx + 14)} ${fmt(b.y)}`;
      at = { x: cx, y: b.y - 40 };
    } else {
      const s = ports.get(`${edge}:from`)!;
      const t = ports.get(`${edge}:to`)!;
      let c1: Point;
      let c2: Point;
      if (route === 'column') {
        c1 = { x: s.x + 80, y: s.y };
        c2 = { x: t.x + 80, y: t.y };
      } else {
        const dir = route === 'forward' ? 1 : -1;
        // Transitions that skip a column swing above (forward) or below (back) the boxes between.
        const swing = route === 'forward' ? MARGIN - 56 : MARGIN + innerH + 56 + (isLow ? ERROR_SWING : 0);
        const reach = long ? 80 : Math.abs(t.x - s.x) / 2;
        c1 = { x: s.x + dir * reach, y: long ? swing : s.y };
        c2 = { x: t.x - dir * reach, y: long ? swing : t.y };
      }
      path = `M ${fmt(s.x)} ${fmt(s.y)} C ${fmt(c1.x)} ${fmt(c1.y)} ${fmt(c2.x)} ${fmt(c2.y)} ${fmt(t.x)} ${fmt(t.y)}`;
      // A low error edge's label sits nearer its source, away from the labels of the others into the same state.
      const mid = bezierPoint(s, c1, c2, t, isLow ? 0.3 : 0.5);
      // Forward labels sit above their line and back labels below, so a pair's labels stay apart.
      at = route === 'column' ? { x: mid.x + 6, y: mid.y + 4 } : { x: mid.x, y: route === 'forward' ? mid.y - 6 : mid.y + 14 };
    }
    const anchor = route === 'column' ? 'start' : 'middle';
    if (route === 'column') labelsRight = Math.max(labelsRight, at.x + edgeText({ from, to, label, isError }).length * LABEL_CHAR_W);
    const errorText = `<tspan class="error-label" fill="${ERROR_COLOUR}">error</tspan>`;
    const content = [label ? escapeXml(label) : '', isError ? errorText : ''].filter(Boolean).join(' · ');
    const text = content ? `<text class="label" x="${fmt(at.x)}" y="${fmt(at.y)}" text-anchor="${anchor}">${content}</text>` : '';
    // Dashed: the way a failed call takes when no transition covers it (red), or a transition the
    // machine never takes (the file allows it, no outcome leads there; grey).
    const [kind, stroke, style, marker] =
      label !== ''
        ? ['', '#5f6368', '', 'state-graph-arrow']
        : isError
          ? [' error', ERROR_COLOUR, ' stroke-dasharray="6 4"', 'state-graph-arrow-error']
          : [' unused', '#5f6368', ' stroke-dasharray="5 4"', 'state-graph-arrow'];
    return `<g class="transition${kind}" data-from="${from}" data-to="${to}"><path d="${path}" fill="none" stroke="${stroke}" stroke-width="1.5"${style} marker-end="url(#${marker})"/>${text}</g>`;
  });

  const nodes = names.map((name) => {
    const state = graph.states[name]!;
    const b = box(name);
    const colour = COLOURS[state.type];
    const highlighted = name === options.highlight;
    const cx = fmt(b.x + b.w / 2);
    return [
      `<g class="state state-${state.type}${highlighted ? ' highlight' : ''}" data-state="${name}">`,
      `<title>${escapeXml(`${name} (${state.type}): ${state.description}`)}</title>`,
      highlighted
        ? `<rect x="${fmt(b.x - 5)}" y="${fmt(b.y - 5)}" width="${fmt(b.w + 10)}" height="${fmt(b.h + 10)}" rx="14" fill="none" stroke="#d93025" stroke-width="3"/>`
        : '',
      `<rect x="${fmt(b.x)}" y="${fmt(b.y)}" width="${fmt(b.w)}" height="${fmt(b.h)}" rx="10" fill="${colour.fill}" stroke="${colour.stroke}" stroke-width="${highlighted ? 3 : 1.5}"/>`,
      `<text x="${cx}" y="${fmt(b.y + 22)}" text-anchor="middle" font-weight="600">${name}</text>`,
      `<text x="${cx}" y="${fmt(b.y + 40)}" text-anchor="middle" font-size="12" fill="${colour.stroke}">${state.type}</text>`,
      '</g>',
    ].join('');
  });

  const width = Math.max(boxesWidth, labelsRight + 16);
  const entry = ports.get('-1:to');
  const start = entry
    ? `<g class="initial"><circle cx="${fmt(entry.x - 40)}" cy="${fmt(entry.y)}" r="7" fill="#202124"/><path d="M ${fmt(entry.x - 33)} ${fmt(entry.y)} L ${fmt(entry.x)} ${fmt(entry.y)}" stroke="#202124" stroke-width="1.5" marker-end="url(#state-graph-arrow)"/></g>`
    : '';

  return [
    `<svg xmlns="http://www.w3.org/2000/svg" class="state-graph" viewBox="0 0 ${fmt(width)} ${fmt(height)}" width="${fmt(width)}" height="${fmt(height)}" role="img" aria-label="State graph, initial state ${escapeXml(graph.initial)}" font-family="system-ui, sans-serif" font-size="14">`,
    `<defs>${[['state-graph-arrow', '#5f6368'], ['state-graph-arrow-error', ERROR_COLOUR]].map(([id, fill]) => `<marker id="${id}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="${fill}"/></marker>`).join('')}</defs>`,
    '<style>.state-graph .label{font-size:12px;fill:#3c4043;paint-order:stroke;stroke:#fff;stroke-width:4px}</style>',
    start,
    ...drawnEdges,
    ...nodes,
    '</svg>',
  ].join('\n');
}

/** The cell of a state's routing settings in the table: `show_output` and `require_approval` as set in the file. */
function settingsOf(state: GraphState): string {
  const approval = state.require_approval;
  const settings = [
    state.show_output === undefined ? '' : `show_output: ${state.show_output}`,
    approval === undefined ? '' : `require_approval: ${Array.isArray(approval) ? `[${approval.join(', ')}]` : approval}`,
  ];
  return settings.filter(Boolean).map((setting) => `<code>${escapeXml(setting)}</code>`).join('<br>');
}

/** A standalone HTML page (no scripts, nothing fetched) showing the drawing of a graph and a table of its states. */
export function toHtmlPage(graph: StateGraph, options: HtmlPageOptions = {}): string {
  const title = options.title ?? 'State graph';
  const rows = Object.entries(graph.states).map(
    ([name, state]) =>
      `<tr><td><code>${name}</code>${name === graph.initial ? ' (initial)' : ''}</td><td>${state.type}</td><td>${escapeXml(state.description)}</td><td>${state.transition.next.map((to) => `<code>${escapeXml(to)}</code>`).join(', ')}</td><td>${settingsOf(state)}</td></tr>`,
  );
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeXml(title)}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2rem; color: #202124; }
table { border-collapse: collapse; margin-top: 1.5rem; }
th, td { border: 1px solid #dadce0; padding: 0.4rem 0.7rem; text-align: left; vertical-align: top; }
svg { max-width: 100%; height: auto; }
</style>
</head>
<body>
<h1>${escapeXml(title)}</h1>
${toSvg(graph)}
<table>
<thead><tr><th>state</th><th>type</th><th>description</th><th>next</th><th>settings</th></tr></thead>
<tbody>
${rows.join('\n')}
</tbody>
</table>
</body>
</html>
`;
}
