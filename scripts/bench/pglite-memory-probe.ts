/**
 * Where the embedded database's memory goes: opens PGlite on a data folder with the
 * service's settings and the given shared buffers, and prints (last line, JSON) the
 * resident memory before and after, the WebAssembly memory's size and resident part, and
 * the JS heap. `--initdb-here` creates the folder in this process, as the service did
 * before it moved initdb to a child process. Run with `--expose-gc`.
 */
import { readFileSync, rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { PGlite } from '@electric-sql/pglite';
import { embeddedStartParams } from '../../storage/create-database.js';

/** What one probe measured, bytes and ms. */
export type PgliteMemoryProbeResult = {
  sharedBuffersMb: number;
  initdbHere: boolean;
  rssLoaded: number;
  rssOpen: number;
  wasmMemory: number;
  wasmResident?: number;
  heapUsed: number;
  openMs: number;
};

const { values } = parseArgs({ options: { 'data-dir': { type: 'string' }, 'shared-buffers-mb': { type: 'string' }, 'initdb-here': { type: 'boolean', default: false } } });
const dataDir = values['data-dir']!;
const sharedBuffersMb = Number(values['shared-buffers-mb']);
const initdbHere = values['initdb-here']!;

async function settle(): Promise<void> {
  for (let round = 0; round < 2; round += 1) {
    (globalThis as { gc?: () => void }).gc?.();
    await sleep(200);
  }
}

if (initdbHere) {
  rmSync(dataDir, { recursive: true, force: true });
}
await settle();
const rssLoaded = process.memoryUsage().rss;
const started = performance.now();
// Opened as the service opens it (its settings); created here first when asked, as PGlite does by itself.
if (initdbHere) await (await PGlite.create(dataDir)).close();
const pglite = await PGlite.create(dataDir, { startParams: embeddedStartParams(sharedBuffersMb) });
await pglite.query('select count(*) from pg_class');
const openMs = performance.now() - started;
await settle();
const wasmMemory = (pglite as unknown as { mod: { wasmMemory: { buffer: ArrayBuffer } } }).mod.wasmMemory.buffer.byteLength;
const result: PgliteMemoryProbeResult = {
  sharedBuffersMb,
  initdbHere,
  rssLoaded,
  rssOpen: process.memoryUsage().rss,
  wasmMemory,
  ...residentOfMapping(wasmMemory),
  heapUsed: process.memoryUsage().heapUsed,
  openMs,
};
await pglite.close();
console.log(JSON.stringify(result));

/** The resident part of the one anonymous mapping exactly as large as the WebAssembly memory, when there is one. */
function residentOfMapping(size: number): { wasmResident?: number } {
  const matches: number[] = [];
  let current: { size: number } | undefined;
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const range = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ 0\s*$/.exec(line);
    if (range) {
      current = { size: parseInt(range[2]!, 16) - parseInt(range[1]!, 16) };
      continue;
    }
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) current = undefined;
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && current?.size === size) matches.push(Number(rss[1]) * 1024);
  }
  return matches.length === 1 ? { wasmResident: matches[0] } : {};
}
