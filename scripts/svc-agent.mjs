#!/usr/bin/env node
// The `svc-agent` command (and what `npm start` and the other npm scripts run): in a
// checkout it first compiles dist/ when the sources changed, then it runs the compiled
// command with source maps, so stack traces name the TypeScript files and lines.
import { ensureBuilt } from './build.mjs';

try {
  ensureBuilt();
} catch (error) {
  process.stderr.write(`svc-agent: ${error.message}\n`);
  process.exit(1);
}
// Before the compiled modules load: only modules loaded after this get their maps read.
process.setSourceMapsEnabled(true);
await import('../dist/scripts/cli.js');
