/**
 * The work a service goes on with in the background once it listens (the tool servers' first
 * connections, the choice of long-term memory's embedder), by name, so that /health can tell
 * what is still starting.
 */
export class StartupWork {
  private readonly pending = new Set<string>();
  private readonly settling: Array<Promise<void>> = [];

  /** Follows `work` under `name` until it settles; its failure is the work's own to report. */
  add(name: string, work: Promise<unknown>): void {
    this.pending.add(name);
    this.settling.push(
      work.then(
        () => this.settle(name),
        () => this.settle(name),
      ),
    );
  }

  /** The names of the work still under way, in the order it was added; empty once all has settled. */
  starting(): string[] {
    return [...this.pending];
  }

  /** Resolves once every piece of work added so far has settled; never rejects. */
  settled(): Promise<void> {
    return Promise.all(this.settling).then(() => {});
  }

  private settle(name: string): void {
    this.pending.delete(name);
  }
}
