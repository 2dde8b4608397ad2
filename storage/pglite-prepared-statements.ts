import { parse, protocol, type PGlite, type Results } from '@electric-sql/pglite';

const serialize = protocol.serialize;
/** Every step but the last leaves the file system to the last (PGlite's own queries do the same). */
const STEP = { syncToFs: false } as const;

type Messages = Parameters<typeof parse.parseResults>[0];
type Parsers = Parameters<typeof parse.parseResults>[1];

/** What PGlite keeps for its own queries: the type serializers and parsers of the instance (its array types included). */
type TypeHandlers = { serializers: Record<number, (value: unknown) => string>; parsers: Parsers };

/**
 * The hot statements on the embedded database, as named prepared statements of its one
 * connection: parsed and described once, then bound and executed, so PGlite plans them no
 * more once it keeps a generic plan. PGlite's `query` parses and plans every statement anew
 * (the unnamed statement); these are the largest statements of a turn. The protocol steps are
 * PGlite's own for `query` (bind, describe, execute, sync), run under its exclusive lock.
 */
export class PGlitePreparedStatements {
  /** Parameter type ids of each statement prepared on this instance, by name. */
  private readonly prepared = new Map<string, Promise<number[]>>();

  constructor(private readonly pglite: PGlite) {}

  async query<R>(name: string, text: string, parameters: readonly unknown[]): Promise<Results<R>> {
    const types = await this.prepare(name, text);
    const { serializers, parsers } = this.pglite as unknown as TypeHandlers;
    const values = parameters.map((value, index) => (value === null || value === undefined ? null : (serializers[types[index]!]?.(value) ?? String(value))));
    const messages = await this.pglite.runExclusive(() =>
      this.steps([serialize.bind({ statement: name, values }), serialize.describe({ type: 'P' }), serialize.execute({})]),
    );
    return parse.parseResults(messages, parsers, { rowMode: 'object' })[0] as Results<R>;
  }

  private prepare(name: string, text: string): Promise<number[]> {
    let types = this.prepared.get(name);
    if (!types) {
      types = this.pglite.runExclusive(async () =>
        parse.parseDescribeStatementResults(await this.steps([serialize.parse({ name, text }), serialize.describe({ type: 'S', name })])),
      );
      this.prepared.set(name, types);
      // A statement that could not be prepared (its table not made yet) is tried again next time.
      types.catch(() => this.prepared.delete(name));
    }
    return types;
  }

  /** Runs `steps`, then the sync that ends them (also after an error, as the protocol wants); returns their messages. */
  private async steps(steps: Uint8Array[]): Promise<Messages> {
    const messages: Messages = [];
    try {
      for (const step of steps) messages.push(...(await this.pglite.execProtocol(step, STEP)).messages);
    } finally {
      messages.push(...(await this.pglite.execProtocol(serialize.sync(), { syncToFs: true })).messages);
    }
    return messages;
  }
}
