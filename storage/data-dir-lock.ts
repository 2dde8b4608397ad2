import { randomUUID } from 'node:crypto';
import { link, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** The lock file in an embedded database's data folder, as PostgreSQL's postmaster.pid: the pid of the process that has it open. */
export const LOCK_FILE = 'svc-agent.pid';

/** The lock files this process holds: a lock with this pid that is not among them was left by an earlier process with the same pid. */
const held = new Set<string>();

/** Another living process (or this one, elsewhere) has the embedded database open. */
export class DataDirInUseError extends Error {
  override readonly name = 'DataDirInUseError';
}

/**
 * Takes the data folder for this process, or throws DataDirInUseError when another living
 * process holds it: two processes on one embedded database would each overwrite what the
 * other wrote. A lock left by a process that died (or by this pid before a restart, as in a
 * container where the service is always pid 1) is taken over. Returns the release, which
 * removes the file only while it is still this process's.
 */
export async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  await mkdir(dataDir, { recursive: true });
  const file = join(dataDir, LOCK_FILE);
  const token = randomUUID();
  const content = `${process.pid}\n${token}\n${new Date().toISOString()}\n`;
  // Written whole under a name of its own, then linked into place (which fails if the lock
  // exists): another process never reads a lock that is half written.
  const draft = `${file}.${token}`;
  await writeFile(draft, content, { mode: 0o600 });
  try {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await link(draft, file);
        break;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const holder = Number((await readFile(file, 'utf8').catch(() => '')).split('\n')[0]);
      const inUse = Number.isInteger(holder) && holder > 0 && (holder === process.pid ? held.has(file) : isAlive(holder));
      // A lock that keeps coming back is another process's, taking it at the same moment.
      if (inUse || attempt >= 3) {
        throw new DataDirInUseError(
          `The embedded database in ${dataDir} is in use by another process (pid ${holder}): only one process may open it. ` +
            `Stop that process first, or set DB_URL to run several on a PostgreSQL server. If no such process runs, remove ${file}.`,
        );
      }
      // Left by a process that is gone.
      await rm(file, { force: true });
    }
  } finally {
    await rm(draft, { force: true });
  }
  held.add(file);
  return async () => {
    held.delete(file);
    const current = await readFile(file, 'utf8').catch(() => null);
    if (current === content) await rm(file, { force: true });
  };
}

/** True when a process with this pid exists (EPERM: it does, under another user). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
