/** PostgreSQL's type id of `text`, the element type of the arrays `binaryTextArray` writes. */
const TEXT_OID = 25;

/**
 * A one-dimensional `text[]` in PostgreSQL's binary format, for a parameter sent as binary
 * (`$n::text[]`): the server copies each element's bytes instead of parsing an array literal
 * in which every quote and backslash of the text is escaped (array_in reads it a character
 * at a time, and the client escaped it a character at a time).
 */
export function binaryTextArray(values: ReadonlyArray<string | null>): Buffer {
  const lengths = values.map((value) => (value === null ? -1 : Buffer.byteLength(value)));
  const hasNull = lengths.includes(-1);
  const header = values.length === 0 ? 12 : 20;
  const array = Buffer.allocUnsafe(header + lengths.reduce((sum, length) => sum + 4 + Math.max(length, 0), 0));
  let at = array.writeInt32BE(values.length === 0 ? 0 : 1, 0);
  at = array.writeInt32BE(hasNull ? 1 : 0, at);
  at = array.writeInt32BE(TEXT_OID, at);
  if (values.length > 0) {
    at = array.writeInt32BE(values.length, at);
    at = array.writeInt32BE(1, at);
  }
  values.forEach((value, index) => {
    at = array.writeInt32BE(lengths[index]!, at);
    if (value !== null) at += array.write(value, at);
  });
  return array;
}
