import { existsSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The package's own folder: the one holding package.json above this module, whether it
 * runs from the TypeScript sources (`config/`), compiled (`dist/config/`) or installed as
 * a command (`<prefix>/lib/node_modules/svc-agent/dist/config/`).
 */
export const PACKAGE_ROOT = findPackageRoot(dirname(fileURLToPath(import.meta.url)));

/** A file shipped with the package (the default deployment file and graph, the inspector page), by its path in the repository. */
export function packageFile(relativePath: string): string {
  return join(PACKAGE_ROOT, relativePath);
}

/**
 * Where a configured file is: an absolute path as it is; a relative one in the working
 * directory, else among the package's own files, so that `config/default-graph.yaml` names
 * the bundled graph wherever the command runs. A file found in neither place resolves in
 * the working directory, for the error to name.
 */
export function resolveConfiguredFile(path: string, workingDir = process.cwd()): string {
  if (isAbsolute(path)) return path;
  const inWorkingDir = resolve(workingDir, path);
  if (existsSync(inWorkingDir)) return inWorkingDir;
  const bundled = packageFile(path);
  return existsSync(bundled) ? bundled : inWorkingDir;
}

function findPackageRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}
