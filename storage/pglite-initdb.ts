import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

/** Whether the embedded database's folder holds no database yet (PostgreSQL writes PG_VERSION there at initdb). */
export function needsInitdb(dataDir: string): boolean {
  return !existsSync(join(dataDir, 'PG_VERSION'));
}

/**
 * Creates the embedded database in `dataDir` in a child process that exits when done.
 * PGlite's initdb grows the process by about 170 MB that V8 and the C allocator keep
 * once used (compiled initdb WebAssembly, its heap); in a child it is all given back, and
 * the service opens the new folder at the size of an existing one. Costs about 0.3 s.
 */
export function initdbInChildProcess(dataDir: string): Promise<void> {
  // Resolved here, from the service's own modules: the child runs with no package around it.
  const pglite = pathToFileURL(createRequire(import.meta.url).resolve('@electric-sql/pglite')).href;
  // PGlite's file system errors are objects with an errno and no message: say what there is.
  const script = `
    const { PGlite } = await import(${JSON.stringify(pglite)});
    try {
      const db = await PGlite.create(${JSON.stringify(dataDir)});
      await db.close();
    } catch (error) {
      process.stderr.write(\`\${error?.message || error?.name || error}\${error?.errno === undefined ? '' : \` (errno \${error.errno})\`}\\n\`);
      process.exit(1);
    }`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '--eval', script], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`creating the embedded database in ${dataDir} failed (exit ${code ?? signal}): ${stderr.trim() || 'no message'}`));
    });
  });
}
