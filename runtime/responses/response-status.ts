/**
 * A response's status: `queued` and `in_progress` while it runs (background responses are seen
 * so), then one of the others; `incomplete` when its turn ended at a length limit (a token budget).
 */
export type ResponseStatus = 'queued' | 'in_progress' | 'completed' | 'incomplete' | 'failed' | 'cancelled';

/** True for the statuses a response ends in. */
export function isFinalStatus(status: unknown): boolean {
  return status === 'completed' || status === 'failed' || status === 'cancelled' || status === 'incomplete';
}
