import { PGlite } from '@electric-sql/pglite';
const mb = (n) => (n / 1048576).toFixed(0);
const extra = process.argv.slice(3).flatMap((c) => ['-c', c]);
const pg = await PGlite.create(process.argv[2], { startParams: [...PGlite.defaultStartParams, ...extra] });
await pg.query('select 1');
global.gc(); await new Promise(r => setTimeout(r, 300)); global.gc();
console.log(extra.join(' '), 'rss', mb(process.memoryUsage().rss), 'wasm', mb(pg.mod.wasmMemory.buffer.byteLength));
await pg.close();
