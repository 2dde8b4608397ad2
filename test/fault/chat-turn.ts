import { sseData } from '../support/service-harness.js';

/** The OpenAI error object. */
export type OpenAiError = { message: string; type: string; param: string | null; code: string | null };

/** What one chat turn got back, streamed or not. */
export type TurnAnswer = {
  status: number;
  sessionId: string | null;
  /** The reply's text: the message content, or the streamed pieces joined. */
  content: string;
  /** Streaming: each content piece, in order. */
  pieces: string[];
  /** Streaming: the stream ended with `data: [DONE]`. */
  done: boolean;
  /** The body of a failed request, or an error event in a stream. */
  error: OpenAiError | null;
};

/** One user message to send. */
export type Turn = {
  text: string;
  stream: boolean;
  sessionId?: string;
  userId?: string;
  signal?: AbortSignal;
  /** Called once the response headers are in, before the body is read. */
  onHeaders?: (status: number) => void;
};

type Chunk = { error?: OpenAiError; choices?: Array<{ delta?: { content?: string } }> };

/**
 * Sends one turn to `POST {baseURL}/chat/completions` with fetch and reads the whole answer;
 * throws when the connection breaks or `signal` aborts.
 */
export async function sendTurn(baseURL: string, turn: Turn): Promise<TurnAnswer> {
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (turn.sessionId) headers['X-Session-ID'] = turn.sessionId;
  if (turn.userId) headers['X-User-ID'] = turn.userId;
  const response = await fetch(`${baseURL}/chat/completions`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ messages: [{ role: 'user', content: turn.text }], stream: turn.stream }),
    signal: turn.signal,
  });
  turn.onHeaders?.(response.status);
  const text = await response.text();
  const answer: TurnAnswer = { status: response.status, sessionId: response.headers.get('x-session-id'), content: '', pieces: [], done: false, error: null };
  if (response.status !== 200) return { ...answer, error: (JSON.parse(text) as { error: OpenAiError }).error };
  if (!turn.stream) {
    const body = JSON.parse(text) as { choices: Array<{ message: { content: string | null } }> };
    return { ...answer, content: body.choices[0]?.message.content ?? '' };
  }
  const events = sseData(text);
  const done = events.at(-1) === '[DONE]';
  const chunks = (done ? events.slice(0, -1) : events).map((event) => JSON.parse(event) as Chunk);
  const pieces = chunks.map((chunk) => chunk.choices?.[0]?.delta?.content ?? '').filter((piece) => piece !== '');
  const error = chunks.find((chunk) => chunk.error)?.error ?? null;
  return { ...answer, content: pieces.join(''), pieces, done, error };
}
