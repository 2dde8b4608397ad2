/**
 * Reads a server-sent event stream and yields each event's `data` (multi-line data joined
 * with newlines); comment lines and other fields are skipped.
 */
export async function* readSseData(body: AsyncIterable<Buffer | Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string[] = [];
  for await (const bytes of body) {
    buffer += decoder.decode(bytes, { stream: true });
    let newline: number;
    while ((newline = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, newline).replace(/\r$/, '');
      buffer = buffer.slice(newline + 1);
      if (line === '') {
        if (data.length > 0) yield data.join('\n');
        data = [];
      } else if (line.startsWith('data:')) {
        data.push(line.slice(line[5] === ' ' ? 6 : 5));
      }
    }
  }
  const last = buffer.replace(/\r$/, '');
  if (last.startsWith('data:')) data.push(last.slice(last[5] === ' ' ? 6 : 5));
  if (data.length > 0) yield data.join('\n');
}
