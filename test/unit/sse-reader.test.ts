import { expect } from 'chai';
import { readSseData } from '../../runtime/llm/sse-reader.js';

async function collect(parts: string[]): Promise<string[]> {
  async function* body() {
    for (const part of parts) yield Buffer.from(part);
  }
  const out: string[] = [];
  for await (const events of readSseData(body())) out.push(...events);
  return out;
}

async function reads(parts: string[]): Promise<string[][]> {
  async function* body() {
    for (const part of parts) yield Buffer.from(part);
  }
  const out: string[][] = [];
  for await (const events of readSseData(body())) out.push(events);
  return out;
}

describe('readSseData', () => {
  it('yields each event data when events are split across chunks', async () => {
    expect(await collect(['data: {"a":', '1}\n\nda', 'ta: [DONE]\n\n'])).to.deep.equal(['{"a":1}', '[DONE]']);
  });

  it('skips comments and other fields, and joins multi-line data', async () => {
    expect(await collect([': keep-alive\n\nevent: x\nid: 3\ndata: one\ndata: two\n\n'])).to.deep.equal(['one\ntwo']);
  });

  it('reads CRLF line ends and data without a space', async () => {
    expect(await collect(['data:x\r\n\r\ndata: y\r\n\r\n'])).to.deep.equal(['x', 'y']);
  });

  it('yields a last event that has no blank line after it', async () => {
    expect(await collect(['data: last'])).to.deep.equal(['last']);
  });

  it('yields the events each read completed together, and nothing for a read that completed none', async () => {
    expect(await reads(['data: a\n\ndata: b\n\ndata: c', '\n', '\ndata: d\n\n'])).to.deep.equal([['a', 'b'], ['c', 'd']]);
  });

  it('joins data lines split across reads, and keeps a data line that is empty', async () => {
    expect(await collect(['data: one\nda', 'ta:\r\ndata: two\r', '\n\r\n'])).to.deep.equal(['one\n\ntwo']);
  });
});
