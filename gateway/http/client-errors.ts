import { STATUS_CODES, type Server } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * Answers requests Node's HTTP parser refuses before any route sees them, in the OpenAI error
 * shape instead of Node's bare status line: headers over Node's limit (16 KB in all) are a
 * 431, anything else that is not valid HTTP a 400. A connection already gone is just closed.
 */
export function answerClientErrors(server: Server): void {
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
    const status = tooLarge ? 431 : 400;
    const message = tooLarge ? 'the request headers are too large: at most 16 KB in all are accepted' : 'the request is not valid HTTP';
    const body = JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code: tooLarge ? 'headers_too_large' : 'bad_request' } });
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}
