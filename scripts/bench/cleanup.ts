/** Something to undo before the bench exits: a child process to stop, a scratch database to drop. */
export type Cleanup = () => Promise<void>;

const cleanups = new Set<Cleanup>();

/** Registers a cleanup; the returned function unregisters it (once it has been done by hand). */
export function addCleanup(cleanup: Cleanup): () => void {
  cleanups.add(cleanup);
  return () => cleanups.delete(cleanup);
}

/** Runs every registered cleanup, newest first, each once; failures are reported, not thrown. */
export async function runCleanups(): Promise<void> {
  for (const cleanup of [...cleanups].reverse()) {
    cleanups.delete(cleanup);
    await cleanup().catch((error: unknown) => console.error(`cleanup failed: ${error instanceof Error ? error.message : String(error)}`));
  }
}
