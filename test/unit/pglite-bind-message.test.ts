import { expect } from 'chai';
import { protocol } from '@electric-sql/pglite';
import { boundExecution } from '../../storage/pglite-prepared-statements.js';

/**
 * PGlite's own Bind, Execute and Sync for the same values, less the one thing written
 * differently: PGlite gives every parameter's format (text, 0) where the message here says
 * "no formats", which PostgreSQL reads as every parameter in text.
 */
function pgliteMessages(statement: string, values: Array<string | null>): Buffer {
  const bind = Buffer.from(protocol.serialize.bind({ statement, values }));
  const formatsAt = 1 + 4 + 1 + Buffer.byteLength(statement) + 1;
  expect(bind.readInt16BE(formatsAt)).to.equal(values.length);
  const formats = bind.subarray(formatsAt + 2, formatsAt + 2 + 2 * values.length);
  expect([...formats].every((byte) => byte === 0)).to.equal(true);
  const withoutFormats = Buffer.concat([bind.subarray(0, formatsAt), Buffer.from([0, 0]), bind.subarray(formatsAt + 2 + 2 * values.length)]);
  withoutFormats.writeInt32BE(withoutFormats.length - 1, 1);
  return Buffer.concat([withoutFormats, Buffer.from(protocol.serialize.execute({})), Buffer.from(protocol.serialize.sync())]);
}

describe('the bound execution of a prepared statement on the embedded database', () => {
  it('is the message PGlite writes, with text of any script, empty strings and nulls', () => {
    const values = ['plain', '', null, 'naïve café 😀 — 日本語', '{"a":"\\"quoted\\""}', 'x'.repeat(70_000), null];
    expect(boundExecution('svc_hot_7', values).equals(pgliteMessages('svc_hot_7', values))).to.equal(true);
  });

  it('is the message PGlite writes for a statement without parameters', () => {
    expect(boundExecution('svc_hot_1', []).equals(pgliteMessages('svc_hot_1', []))).to.equal(true);
  });

  it('gives each parameter its format when one is binary: a Buffer is sent as it is, in binary, the strings in text', () => {
    const binary = Buffer.from([0, 0, 0, 1, 0xff]);
    const message = boundExecution('svc_hot_2', ['text', binary, null]);
    const formatsAt = 1 + 4 + 1 + Buffer.byteLength('svc_hot_2') + 1;
    expect([0, 1, 2, 3].map((index) => message.readInt16BE(formatsAt + 2 * index))).to.deep.equal([3, 0, 1, 0]);
    const valuesAt = formatsAt + 2 * 4;
    expect(message.readInt16BE(valuesAt)).to.equal(3);
    expect(message.readInt32BE(valuesAt + 2)).to.equal(4);
    expect(message.subarray(valuesAt + 6, valuesAt + 10).toString()).to.equal('text');
    expect(message.readInt32BE(valuesAt + 10)).to.equal(binary.length);
    expect(message.subarray(valuesAt + 14, valuesAt + 14 + binary.length).equals(binary)).to.equal(true);
    expect(message.readInt32BE(valuesAt + 14 + binary.length)).to.equal(-1);
    expect(message.readInt32BE(1)).to.equal(message.length - 1 - Buffer.from(protocol.serialize.execute({})).length - Buffer.from(protocol.serialize.sync()).length);
  });
});
