// The machines folder's public face: the graph file format, its validation, the generated
// session machine, the arrows of a drawing and the drawings. Pure code, no I/O.
export * from './graph-schema.js';
export * from './validate-graph.js';
export * from './graph-routes.js';
export * from './create-session-machine.js';
export * from './graph-edges.js';
export * from './render-graph.js';
