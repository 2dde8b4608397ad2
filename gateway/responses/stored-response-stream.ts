import type { Response } from 'express';
import { storedEventsOf, type ReplayDeps } from '../../runtime/responses/response-replay.js';
import { ServiceError } from '../../runtime/service-error.js';
import { SseWriter } from '../http/sse-writer.js';

/** A comment line goes out after this long without events, so proxies keep a quiet stream open. */
const HEARTBEAT_MS = 10_000;

/**
 * Streams a background response's stored events after `startingAfter` to the client, then its
 * live ones, until the response's end (see `storedEventsOf`); a stream with nothing to send
 * gets its end only. Ends when the client goes; the response runs on.
 */
export async function streamStoredResponse(deps: ReplayDeps, id: string, body: Record<string, unknown>, startingAfter: number, res: Response): Promise<void> {
  if (body.background !== true) {
    throw new ServiceError('INVALID_REQUEST', `only a response created with background: true can be streamed again; '${id}' was not`, { param: 'stream' });
  }
  const gone = new AbortController();
  res.on('close', () => gone.abort());
  const sse = new SseWriter(res);
  sse.start();
  let quietSince = Date.now();
  for await (const event of storedEventsOf(deps, id, startingAfter, gone.signal)) {
    if (event) {
      sse.event(event.type, event.data);
      quietSince = Date.now();
    } else if (Date.now() - quietSince >= HEARTBEAT_MS) {
      sse.heartbeat();
      quietSince = Date.now();
    }
  }
  sse.end();
}
