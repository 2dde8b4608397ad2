import type { Response } from 'express';
import type { BackgroundResponseStore, ResponseStore } from '../ports.js';
import { ServiceError } from '../service-error.js';
import type { BackgroundRuns } from './background-runs.js';
import { isFinalStatus } from '../../gateway/responses/responses-format.js';
import { SseWriter } from '../../gateway/http/sse-writer.js';

/** Events read from storage at a time. */
const PAGE = 500;

/** The longest wait for new events of a response run by another process (this one's readers are woken at once). */
const POLL_MS = 250;

/** A comment line goes out after this long without events, so proxies keep a quiet stream open. */
const HEARTBEAT_MS = 10_000;

/** What reading a response's events again needs. */
export type ReplayDeps = { responses: ResponseStore; background: BackgroundResponseStore; runs: BackgroundRuns };

/**
 * Streams a background response's stored events after `startingAfter` (a `sequence_number`;
 * -1 for all), then its live ones as they are stored, until its end (its last event, or, for a
 * cancelled response, which has none, its final status). Only stored events are sent: a reader
 * at or past the last event, or of a response whose events were deleted after their retention,
 * gets the stream's end and nothing else. Works from any process: the events are read from
 * storage, and a reader here is woken as soon as a batch is stored. Ends when the client goes;
 * the response runs on.
 */
export async function replayResponse(deps: ReplayDeps, id: string, body: Record<string, unknown>, startingAfter: number, res: Response): Promise<void> {
  if (body.background !== true) {
    throw new ServiceError('INVALID_REQUEST', `only a response created with background: true can be streamed again; '${id}' was not`, { param: 'stream' });
  }
  const gone = new AbortController();
  res.on('close', () => gone.abort());
  const sse = new SseWriter(res);
  sse.start();
  let after = startingAfter;
  let quietSince = Date.now();
  // The events and the final status are stored in one statement (a run whose process died is
  // failed with its last event, in one statement too): once the status reads final, one more
  // read has the last events, if any are left after `after`.
  let ended = false;
  let sentLast = false;
  while (!gone.signal.aborted && !sentLast) {
    const events = await deps.background.eventsAfter(id, after, PAGE);
    for (const event of events) {
      sse.event(event.type, event.data);
      after = event.sequence;
      sentLast ||= isLastEvent(event.type);
    }
    if (events.length > 0) quietSince = Date.now();
    if (sentLast || events.length === PAGE) continue;
    if (ended) break;
    const now = await deps.responses.get(id);
    if (!now) break;
    if (isFinalStatus(now.body.status)) {
      ended = true;
      continue;
    }
    await deps.runs.waitForEvents(id, POLL_MS, gone.signal);
    if (Date.now() - quietSince >= HEARTBEAT_MS) {
      sse.heartbeat();
      quietSince = Date.now();
    }
  }
  sse.end();
}

/** The events that end a response's stream. */
function isLastEvent(type: string): boolean {
  return type === 'response.completed' || type === 'response.failed';
}
