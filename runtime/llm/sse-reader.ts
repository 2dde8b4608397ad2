/**
 * Reads a server-sent event stream and yields, for each read of the body, the `data` of the
 * events that read completed (multi-line data joined with newlines), in order; comment lines
 * and other fields are skipped. One step per read, not per event: the pieces an LLM server
 * sent together are handled together, without a promise each.
 */
export async function* readSseData(body: AsyncIterable<Buffer | Uint8Array>): AsyncGenerator<string[]> {
  const decoder = new TextDecoder();
  let rest = '';
  /** The data lines of the event being read, joined (undefined before its first). */
  let data: string | undefined;
  for await (const bytes of body) {
    const text = rest + decoder.decode(bytes, { stream: true });
    const events: string[] = [];
    let start = 0;
    let newline: number;
    while ((newline = text.indexOf('\n', start)) >= 0) {
      const end = newline > start && text.charCodeAt(newline - 1) === CR ? newline - 1 : newline;
      if (end === start) {
        if (data !== undefined) events.push(data);
        data = undefined;
      } else if (text.startsWith('data:', start)) {
        const line = text.slice(start + (text.charCodeAt(start + 5) === SPACE ? 6 : 5), end);
        data = data === undefined ? line : `${data}\n${line}`;
      }
      start = newline + 1;
    }
    rest = text.slice(start);
    if (events.length > 0) yield events;
  }
  const last = rest.endsWith('\r') ? rest.slice(0, -1) : rest;
  if (last.startsWith('data:')) {
    const line = last.slice(last.charCodeAt(5) === SPACE ? 6 : 5);
    data = data === undefined ? line : `${data}\n${line}`;
  }
  if (data !== undefined) yield [data];
}

const CR = 13;
const SPACE = 32;
