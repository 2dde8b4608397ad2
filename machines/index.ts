// The machines folder's public face: the graph file format, its validation, the generated
// session machine and the graph drawings. Pure code, no I/O.
export * from './graph-schema.js';
export * from './validate-graph.js';
export * from './graph-routes.js';
export * from './create-session-machine.js';
export * from './render-graph.js';
