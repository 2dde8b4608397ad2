import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { errorBody } from './openai-shapes.js';

/** A request the fake LLM refuses, answered with this status and an OpenAI error body. */
export class FakeLlmHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'FakeLlmHttpError';
  }
}

/** The request body parsed as a JSON object; 400 when it is not JSON or not an object, 413 when too big. */
export function readJsonObject(req: IncomingMessage, maxBytes: number): Promise<Record<string, unknown>> {
  return readBody(req, maxBytes).then(parseObject);
}

// Plain 'data' events: an async iterator per request costs more than the whole fake answer.
function readBody(req: IncomingMessage, maxBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) chunks.push(chunk);
    });
    req.once('end', () => {
      if (size > maxBytes) reject(new FakeLlmHttpError(413, `Request body larger than ${maxBytes} bytes`));
      else resolve(chunks.length === 1 ? (chunks[0] as Buffer).toString('utf8') : Buffer.concat(chunks).toString('utf8'));
    });
    req.once('error', reject);
  });
}

function parseObject(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new FakeLlmHttpError(400, 'Request body is not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new FakeLlmHttpError(400, 'Request body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

/** Sends a whole JSON response with its length. */
export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Sends an OpenAI error response. */
export function sendError(res: ServerResponse, status: number, message: string, type?: string, code?: string | null): void {
  sendJson(res, status, errorBody(status, message, type, code));
}

/** Waits `ms` unless the signal fires first; true when the wait ran out and the exchange is still on. */
export async function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  if (ms <= 0 || signal.aborted) return !signal.aborted;
  try {
    await sleep(ms, undefined, { signal });
    return true;
  } catch {
    return false;
  }
}

/** Cuts the connection under a response once what was written has left, so the client sees a truncated body. */
export function cutConnection(res: ServerResponse): void {
  const socket = res.socket;
  if (socket === null) return;
  socket.end(() => socket.destroy());
}
