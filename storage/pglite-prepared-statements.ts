import { parse, protocol, type PGlite, type Results } from '@electric-sql/pglite';

const serialize = protocol.serialize;

type Messages = Parameters<typeof parse.parseResults>[0];
type Parsers = Parameters<typeof parse.parseResults>[1];

/** What PGlite keeps for its own queries: the type serializers and parsers of the instance (its array types included). */
type TypeHandlers = { serializers: Record<number, (value: unknown) => string>; parsers: Parsers };

/**
 * The hot statements on the embedded database, as named prepared statements of its one
 * connection: parsed and described once, then bound and executed, so PGlite plans them no
 * more once it keeps a generic plan. PGlite's `query` parses and plans every statement anew
 * (the unnamed statement); these are the largest statements of a turn. The messages are
 * those PGlite's `query` sends, less the description of the rows (read once, at
 * preparation), given in one input, under PGlite's exclusive lock.
 */
export class PGlitePreparedStatements {
  /** What each statement prepared on this instance takes and returns, by name. */
  private readonly prepared = new Map<string, Promise<Prepared>>();

  constructor(private readonly pglite: PGlite) {}

  async query<R>(name: string, text: string, parameters: readonly unknown[]): Promise<Results<R>> {
    const { types, rowDescription } = await this.prepare(name, text);
    const { serializers, parsers } = this.pglite as unknown as TypeHandlers;
    const values = parameters.map((value, index) =>
      value === null || value === undefined ? null : Buffer.isBuffer(value) ? value : (serializers[types[index]!]?.(value) ?? String(value)),
    );
    // Bind, execute and sync as one input: PGlite runs them in one call, and after an error
    // the server skips to the sync, which is already there.
    const input = boundExecution(name, values);
    const { messages } = await this.pglite.runExclusive(() => this.pglite.execProtocol(input, { syncToFs: true }));
    // The rows are described once, at preparation.
    return parse.parseResults(rowDescription ? [rowDescription, ...messages] : messages, parsers, { rowMode: 'object' })[0] as Results<R>;
  }

  private prepare(name: string, text: string): Promise<Prepared> {
    let prepared = this.prepared.get(name);
    if (!prepared) {
      prepared = this.pglite.runExclusive(async () => {
        const input = Buffer.concat([serialize.parse({ name, text }), serialize.describe({ type: 'S', name }), serialize.sync()]);
        const { messages } = await this.pglite.execProtocol(input, { syncToFs: false });
        return { types: parse.parseDescribeStatementResults(messages), rowDescription: messages.find((message) => message.name === 'rowDescription') };
      });
      this.prepared.set(name, prepared);
      // A statement that could not be prepared (its table not made yet) is tried again next time.
      prepared.catch(() => this.prepared.delete(name));
    }
    return prepared;
  }
}

/** A prepared statement: its parameters' type ids, and the description of its rows (none if it returns none). */
type Prepared = { types: number[]; rowDescription: Messages[number] | undefined };

/** Execute (the unnamed portal, every row) then Sync, the same after every Bind: PGlite's serializer writes them once. */
const EXECUTE_AND_SYNC = Buffer.concat([serialize.execute({}), serialize.sync()]);

/**
 * The Bind (the unnamed portal, every column as text; each parameter as text, or binary when
 * given as a Buffer), Execute and Sync messages of a prepared statement, written in one buffer
 * by Node's UTF-8 encoder. PGlite's own serializer measures each string twice in a loop over
 * its characters and copies the message three times: some 55 µs for a turn's end of 10 kB of
 * parameters, against 4 µs here.
 */
export function boundExecution(statement: string, values: ReadonlyArray<string | Buffer | null>): Buffer {
  const lengths = values.map((value) => (value === null ? -1 : typeof value === 'string' ? Buffer.byteLength(value) : value.length));
  // With a binary parameter each parameter has its format code; without, none means all text.
  const formats = values.some((value) => Buffer.isBuffer(value)) ? values.length : 0;
  // Type and length, portal, statement, formats, count, values, no column formats (all text).
  const bindLength = 4 + 1 + Buffer.byteLength(statement) + 1 + 2 + 2 * formats + 2 + lengths.reduce((sum, length) => sum + 4 + Math.max(length, 0), 0) + 2;
  const message = Buffer.allocUnsafe(1 + bindLength + EXECUTE_AND_SYNC.length);
  let at = message.writeUInt8(0x42, 0);
  at = message.writeInt32BE(bindLength, at);
  at = message.writeUInt8(0, at);
  at += message.write(statement, at);
  at = message.writeUInt8(0, at);
  at = message.writeInt16BE(formats, at);
  if (formats > 0) for (const value of values) at = message.writeInt16BE(Buffer.isBuffer(value) ? 1 : 0, at);
  at = message.writeInt16BE(values.length, at);
  values.forEach((value, index) => {
    at = message.writeInt32BE(lengths[index]!, at);
    if (typeof value === 'string') at += message.write(value, at);
    else if (value !== null) at += value.copy(message, at);
  });
  at = message.writeInt16BE(0, at);
  EXECUTE_AND_SYNC.copy(message, at);
  return message;
}
