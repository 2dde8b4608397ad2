import type { BackgroundResponseStore, ResponseStore, StoredResponseEvent } from '../ports.js';
import type { BackgroundRuns } from './background-runs.js';
import { isFinalStatus } from './response-status.js';

/** Events read from storage at a time. */
const PAGE = 500;

/** The longest wait for new events of a response run by another process (this one's readers are woken at once). */
const POLL_MS = 250;

/** What reading a response's events again needs. */
export type ReplayDeps = { responses: ResponseStore; background: BackgroundResponseStore; runs: BackgroundRuns };

/**
 * A background response's stored events after `startingAfter` (a `sequence_number`; -1 for
 * all), then its live ones as they are stored, until its end (its last event, or, for a
 * cancelled response, which has none, its final status). Only stored events are given: a
 * reader at or past the last event, or of a response whose events were deleted after their
 * retention, gets nothing. Works from any process: the events are read from storage, and a
 * reader here is woken as soon as a batch is stored. After each wait that brought nothing new
 * (`POLL_MS` at most) it gives `undefined`, so that a reader can tell how long it has been
 * quiet. Ends when `signal` aborts; the response runs on.
 */
export async function* storedEventsOf(deps: ReplayDeps, id: string, startingAfter: number, signal: AbortSignal): AsyncGenerator<StoredResponseEvent | undefined> {
  let after = startingAfter;
  // The events and the final status are stored in one statement (a run whose process died is
  // failed with its last event, in one statement too): once the status reads final, one more
  // read has the last events, if any are left after `after`.
  let ended = false;
  let gaveLast = false;
  while (!signal.aborted && !gaveLast) {
    const events = await deps.background.eventsAfter(id, after, PAGE);
    for (const event of events) {
      yield event;
      after = event.sequence;
      gaveLast ||= isLastEvent(event.type);
    }
    if (gaveLast || events.length === PAGE) continue;
    if (ended) break;
    const now = await deps.responses.get(id);
    if (!now) break;
    if (isFinalStatus(now.body.status)) {
      ended = true;
      continue;
    }
    await deps.runs.waitForEvents(id, POLL_MS, signal);
    yield undefined;
  }
}

/** The events that end a response's stream. */
function isLastEvent(type: string): boolean {
  return type === 'response.completed' || type === 'response.failed';
}
