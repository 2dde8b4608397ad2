/** Where a part that could not be closed is told. */
type CloseLog = { warn(message: string): void };

/**
 * The parts a starting service has opened so far (the database, the tool servers, the LLM
 * client's connections, listeners…), each with how to close it. A start that fails closes them
 * in the reverse order, so that nothing it opened outlives it: the embedded database's folder is
 * free again, no tool server process is left, no connection stays open. A part that fails to
 * close is logged, and the others are closed still; the start's own error is the one reported.
 */
export class OpenedParts {
  private readonly parts: Array<{ name: string; close: () => unknown }> = [];

  constructor(private readonly log: CloseLog) {}

  /** Notes a part just opened, and how to close it. */
  add(name: string, close: () => unknown): void {
    this.parts.push({ name, close });
  }

  /** Closes every part opened, the last first. */
  async closeAll(): Promise<void> {
    for (const { name, close } of this.parts.splice(0).reverse()) {
      try {
        await close();
      } catch (error) {
        this.log.warn(`after the failed start, closing ${name} failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  }
}
