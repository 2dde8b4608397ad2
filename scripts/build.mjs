// `npm run build` (and `npm install`, through `prepare`): compiles the TypeScript sources
// into dist/ with source maps, unless dist/ was already built from exactly these sources.
// Plain JavaScript, because it runs before anything is compiled; `scripts/svc-agent.mjs`
// calls it before each start, so what runs is never older than the sources.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The repository, or the installed package (which ships dist/ and no sources). */
export const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The folders compiled by tsconfig.build.json. */
const SOURCE_DIRS = ['machines', 'runtime', 'gateway', 'storage', 'config', 'scripts'];
/** Besides the sources, what changes the compiled output. */
const BUILD_FILES = ['tsconfig.json', 'tsconfig.build.json'];
/** Written last by a build that succeeded: the digest of the sources it was built from. */
const STAMP = join('dist', '.sources-digest');

/**
 * Builds dist/ when it is missing or was built from other sources. Returns whether it
 * compiled. In an installed package (no tsconfig.build.json) dist/ is what was packed.
 */
export function ensureBuilt(root = PACKAGE_ROOT, compile = runTsc) {
  if (!existsSync(join(root, 'tsconfig.build.json'))) return false;
  const digest = sourcesDigest(root);
  const stamp = join(root, STAMP);
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === digest) return false;
  process.stderr.write('svc-agent: compiling the TypeScript sources into dist/ (they changed since the last build)\n');
  // From scratch: a source that was deleted or renamed leaves nothing behind.
  rmSync(join(root, 'dist'), { recursive: true, force: true });
  compile(root);
  writeFileSync(stamp, digest);
  return true;
}

/** A SHA-256 over the path and content of every TypeScript source and build setting. */
export function sourcesDigest(root) {
  const hash = createHash('sha256');
  const files = [...BUILD_FILES.map((file) => join(root, file)), ...SOURCE_DIRS.flatMap((dir) => typeScriptFiles(join(root, dir)))].sort();
  for (const file of files) {
    hash.update(relative(root, file)).update('\0');
    hash.update(existsSync(file) ? readFileSync(file) : '').update('\0');
  }
  return hash.digest('hex');
}

function typeScriptFiles(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => join(entry.parentPath ?? entry.path, entry.name));
}

function runTsc(root) {
  let tsc;
  try {
    tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
  } catch {
    throw new Error('TypeScript is not installed: run `npm install` (with its development dependencies) to build the service');
  }
  const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) throw new Error(`compiling the sources failed (tsc exited with ${result.status ?? result.signal})`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    ensureBuilt();
  } catch (error) {
    process.stderr.write(`svc-agent: ${error.message}\n`);
    process.exit(1);
  }
}
